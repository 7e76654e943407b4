// End-to-end check of the installed .vsix in a real VS Code (code-server), driven by
// Debian's headless Chromium through puppeteer-core. run-e2e.sh starts code-server with
// the extension installed and a workspace holding a dataset with a malformed line 6 and
// a diverging HF run; this script
//   1. opens the dataset: an error squiggle on line 6, and a Problems row with the rule id at Ln 6;
//   2. opens the run's trainer_state.json: the "trainproof: FAIL" code lens, the status
//      bar's worst verdict, and a TP-DIVERGE Problems row;
//      then reveals TP-DIVERGE's line from the Problems panel (a squiggle at line 292);
//   3. clicks the run's "Show run" code lens: the run report opens in a webview beside the
//      log, with its loss chart and TP-DIVERGE; closed, and opened again from the command
//      palette ("trainproof: Show run" on the active log);
//   4. runs "trainproof: Show output" from the command palette: the server was started
//      from the bundled copy;
//   5. opens a log with bare NaN (as HF writes them): it is a "Training log (JSON)", so
//      every problem in the Problems panel is trainproof's (no "Value expected" from VS
//      Code's JSON validator);
//   6. the trained-tokens map: opens a chat dataset (the workspace's settings name its
//      tokenizer folder, made by run-e2e.sh with the bundled tokenizers, max length 12 and
//      assistant-only loss): hovering line 1 shows that row's map (the rendered
//      conversation with the trained tokens between ⟦ ⟧ and ✂ where truncation cuts, the
//      token counts); the file's "token map: p50 …" code lens gives the percentiles, the
//      shares and the histogram, and clicking it runs preflight with the map (a
//      notification, TP-MAP-RESPONSE-CUT in the Problems panel);
//   7. a quick fix: opens a training script whose TrainingArguments sets
//      load_best_model_at_end with save_strategy "steps" and eval_strategy "epoch"
//      (TP-SCRIPT-BEST-STRATEGY-MISMATCH, static: no transformers in the server's
//      interpreter), applies "set save_strategy='epoch' to match" from the Quick Fix menu
//      (Ctrl+.) and checks the buffer changed on that line only, to exactly the fix's
//      text, the finding left the Problems panel, and the saved file is the same;
// saving a screenshot of each step in the artefacts folder. With --untrusted (a window
// whose folder is not trusted, holding modules that leave a marker file when imported):
//   the malformed dataset and the NaN log still get their static diagnostics, the server
//   says it runs in Restricted Mode, a "Run doctor" lens still answers, and no marker
//   appears.
// Waits poll the DOM with a deadline; nothing is assumed to have happened after a fixed sleep.
//
//   node e2e.js URL WORKSPACE ARTIFACTS [--untrusted MARKERS_DIR]
'use strict';
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const [url, workspace, artifacts, mode, markers] = process.argv.slice(2);
const UNTRUSTED = mode === '--untrusted';
const NAN_LOG = path.join(workspace, 'runs', 'nan_loss', 'trainer_state.json');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const DATASET = path.join(workspace, 'data', 'train.jsonl');
const TRAINER_STATE = path.join(workspace, 'runs', 'lr_hot_diverges', 'trainer_state.json');
const MALFORMED_LINE = 6;
const TIMEOUT_MS = Number(process.env.E2E_TIMEOUT_MS || 90000);

const RUN_TITLE = 'Run: lr_hot_diverges/trainer_state.json';

// 6. The token map of data/chat.jsonl (run-e2e.sh writes it, the tokenizer and the
// settings), as server/token_map.py renders it for fixtures/tokenizers/make_chat_map_tokenizer.py's
// tokenizer (counts by hand in that script's docstring): line 1 is 14 tokens, its 6
// trained ones (the assistant's "two plus two is four </s>") cut to 4 by max length 12.
const CHAT = path.join(workspace, 'data', 'chat.jsonl');
const MAP_HOVER = [
  'Token map · line 1 · chat · loss assistant-only · max length 12 (keep_start)',
  '14 tokens, 4 trained (6 before truncation); truncation cuts 2 token(s) after token 12; turns: user, assistant',
  '<|user|> what is two plus two <|end|> <|assistant|> ⟦two plus two is⟧✂ four </s>',
];
// Rows of 14, 18 and 10 tokens: two over 12, both losing trained tokens; the histogram's
// 16 bins hold one row each in three of them (full bars), the empty bins no-break spaces
// (plain ones would collapse in the lens's HTML). VS Code trims the title's end, so the
// six empty bins after the last bar are not drawn; the five before it are.
const MAP_LENS = 'token map: p50 14 · p95 18 · p99 18 · max 18 · 66.7% over 12 · 66.7% cut · 0% train nothing · ';
const MAP_HISTOGRAM = `${'\u00a0'.repeat(5)}█\u00a0█\u00a0█`;
// 7. The quick fix on train.py (run-e2e.sh writes it): line 6's "steps" becomes 'epoch'.
const SCRIPT = path.join(workspace, 'train.py');
const FIX_RULE = 'TP-SCRIPT-BEST-STRATEGY-MISMATCH';
const FIX_TITLE = "trainproof: set save_strategy='epoch' to match";
const FIX_LINE = 6;
const FIXED_LINE = "    save_strategy='epoch',";

const results = { checks: [], screenshots: [], problems: {}, codeLenses: [], statusBar: null, runReport: null, output: [] };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function check(name, ok, detail) {
  results.checks.push({ name, ok: Boolean(ok), detail });
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` — ${detail}` : ''}`);
}

async function waitFor(what, fn, timeout = TIMEOUT_MS) {
  const deadline = Date.now() + timeout;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = undefined; // the page is (re)loading
    }
    await sleep(500);
  }
  console.log(`  (gave up waiting for ${what} after ${timeout / 1000} s)`);
  return last;
}

async function shot(page, name) {
  const file = path.join(artifacts, UNTRUSTED ? `untrusted-${name}` : name);
  await page.screenshot({ path: file });
  results.screenshots.push(file);
  console.log(`  screenshot: ${file}`);
}

async function openFile(page, file) {
  const origin = new URL(url);
  const payload = encodeURIComponent(JSON.stringify([['openFile', `vscode-remote://${origin.host}${file}`]]));
  await page.goto(`${url}/?folder=${encodeURIComponent(workspace)}&payload=${payload}`, { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('.monaco-workbench', { timeout: TIMEOUT_MS });
  await waitFor(`the editor tab of ${path.basename(file)}`, () => page.$$eval('.tab .label-name',
    (els, name) => els.some((e) => e.textContent.trim() === name), path.basename(file)));
}

async function press(page, ...keys) {
  for (const k of keys) await page.keyboard.down(k);
  for (const k of [...keys].reverse()) await page.keyboard.up(k);
}

// A squiggle is on line N when an error decoration starts at the top of that line's row.
function squiggleOnLine(page, line) {
  return page.evaluate((n) => {
    const number = [...document.querySelectorAll('.monaco-editor .line-numbers')].find((e) => e.innerText.trim() === String(n));
    if (!number) return undefined;
    const top = number.getBoundingClientRect().top;
    const onLine = [...document.querySelectorAll('.monaco-editor .squiggly-error')]
      .filter((e) => Math.abs(e.getBoundingClientRect().top - top) < 3);
    return onLine.length ? `an error squiggle starts on line ${n} (${onLine.length} decoration(s))` : undefined;
  }, line);
}

async function problemRows(page) {
  return page.$$eval('.markers-panel .monaco-tl-contents', (els) => els.map((e) => e.innerText.replace(/\s+/g, ' ').trim()));
}

// The Problems panel's rows once one of them names `id` (or, after the wait, whatever it shows).
async function problemsWith(page, id) {
  await showProblems(page);
  return await waitFor(`a ${id} problem`, async () => {
    const rows = await problemRows(page);
    return rows.some((r) => r.includes(id)) ? rows : undefined;
  }) || await problemRows(page);
}

async function showProblems(page) {
  // The Problems panel, opened through its command (Ctrl+Shift+M toggles it).
  const visible = await page.$('.markers-panel');
  if (!visible || !(await visible.isVisible())) {
    await press(page, 'Control', 'Shift', 'KeyM');
  }
  await waitFor('the Problems panel', () => page.$('.markers-panel'));
}

// The run report page: webviews live in nested iframes, so look in every frame for the
// one that holds the page (its SVG charts).
async function runReportFrame(page) {
  for (const frame of page.frames()) {
    try {
      const found = await frame.evaluate(() => {
        const charts = document.querySelectorAll('svg.chart');
        return charts.length ? { title: document.title, charts: charts.length, text: document.body.innerText } : undefined;
      });
      if (found) return found;
    } catch (e) {
      // a frame that is navigating away
    }
  }
  return undefined;
}

async function editorTabs(page) {
  return page.$$eval('.tab .label-name', (els) => els.map((e) => e.textContent.trim()));
}

async function runCommand(page, title) {
  await press(page, 'F1');
  await page.waitForSelector('.quick-input-widget input', { visible: true, timeout: 15000 });
  // F1 opens the palette with ">" already typed.
  await page.keyboard.type(title);
  // Enter runs the focused row: wait until that is the command.
  await waitFor(`"${title}" focused in the command palette`, () => page.$$eval('.quick-input-list .monaco-list-row.focused',
    (rows, t) => rows.some((r) => r.innerText.includes(t)), title.replace(/^.*?: /, '')), 15000);
  await page.keyboard.press('Enter');
}

// The NaN log: trainproof's problems, and nobody else's (VS Code's JSON validator would
// flag every bare NaN: the log's language is "Training log (JSON)", which it does not check).
async function nanLogProblems(page, prefix) {
  await openFile(page, NAN_LOG);
  const rows = await problemsWith(page, 'TP-NAN');
  results.problems.nanLog = rows;
  rows.forEach((r) => console.log(`  problem: ${r}`));
  // A finding's related information is a child row, "file [Ln 82, Col 5] : message" (the
  // other end of the evidence, e.g. the best loss level): part of that finding, not a problem.
  const related = (r) => /\[Ln \d+, Col \d+\] : /.test(r);
  const problems = rows.filter((r) => r.includes('[Ln ') && !related(r));
  const foreign = problems.filter((r) => !/TP-[A-Z]/.test(r));
  check(`${prefix}NaN log: Problems panel shows TP-NAN`, problems.some((r) => r.includes('TP-NAN')));
  check(`${prefix}NaN log: only trainproof's problems (${problems.length}), none from the JSON validator`,
    problems.length > 0 && foreign.length === 0, foreign.join(' | ') || undefined);
  const mode = await waitFor('the language mode in the status bar', () => page.$$eval('.statusbar-item',
    (els) => els.map((e) => e.innerText.trim()).find((t) => t === 'Training log (JSON)')), 20000);
  check(`${prefix}NaN log: language mode "Training log (JSON)"`, mode, mode);
}

async function untrusted(page) {
  // Static checks only, in Restricted Mode: the dataset and the NaN log are still judged.
  await openFile(page, DATASET);
  const squiggle = await waitFor(`a squiggle on line ${MALFORMED_LINE} of train.jsonl`, () => squiggleOnLine(page, MALFORMED_LINE));
  check(`untrusted: dataset squiggle on line ${MALFORMED_LINE}`, squiggle, squiggle);
  const rows = await problemsWith(page, 'TP-PRE-MALFORMED-JSONL');
  check('untrusted: Problems panel shows TP-PRE-MALFORMED-JSONL', rows.some((r) => r.includes('TP-PRE-MALFORMED-JSONL')));
  await shot(page, '01-dataset.png');
  await nanLogProblems(page, 'untrusted: ');
  // A server command that runs a child process (doctor) still answers, from outside the folder.
  // Found and clicked in one try: the lenses are drawn again when the file's diagnostics
  // arrive, and a lens found before that is detached by the time it is clicked.
  const doctorLens = await waitFor('the Run doctor code lens, clicked', async () => {
    const handle = await page.evaluateHandle(() => [...document.querySelectorAll('.codelens-decoration a')]
      .find((a) => a.innerText.trim() === 'Run doctor'));
    const lens = handle.asElement();
    if (!lens) return undefined;
    await lens.click();  // throws on a detached lens: waitFor tries again
    return lens;
  });
  const toast = doctorLens && await waitFor('the doctor result notification', () => page.$$eval(
    '.notifications-toasts .notification-list-item-message', (els) => els.map((e) => e.innerText.trim())
      .find((t) => t.startsWith('trainproof doctor'))));
  check('untrusted: "Run doctor" answers', toast, toast);
  await shot(page, '02-nan-log-and-doctor.png');
  await runCommand(page, 'trainproof: Show output');
  const output = await waitFor('the server log in the output channel', async () => {
    const text = await page.$$eval('.part.panel .monaco-editor .view-line',
      (els) => els.map((e) => e.innerText.replace(/\u00a0/g, ' ')).join(''));
    return text.includes('server started') ? text : undefined;
  }, 30000) || '';
  const started = /starting the server[^\n]*?\]/.exec(output.replace(/\s+/g, ' '));
  check('untrusted: the server runs in Restricted Mode from the bundled copy',
    started && started[0].includes('Restricted Mode') && started[0].includes('bundled copy'), started ? started[0] : undefined);
  await shot(page, '03-output-channel.png');
  const left = fs.readdirSync(markers);
  results.markers = left;
  check('untrusted: no workspace code ran and no setting wrote a file (no marker)', left.length === 0, left.join(', ') || 'none');
}

// The active editor's rendered lines: line number -> text (spaces as spaces).
function editorLines(page) {
  return page.evaluate(() => {
    const editor = document.querySelector('.editor-group-container.active .monaco-editor');
    if (!editor) return undefined;
    const rows = [...editor.querySelectorAll('.view-lines .view-line')]
      .map((e) => ({ top: e.getBoundingClientRect().top, text: e.innerText.replace(/\u00a0/g, ' ') }));
    const out = {};
    for (const number of editor.querySelectorAll('.line-numbers')) {
      const top = number.getBoundingClientRect().top;
      const row = rows.find((r) => Math.abs(r.top - top) < 3);
      if (row) out[Number(number.innerText.trim())] = row.text;
    }
    return out;
  });
}

// A point over the text of line N in the active editor (for the mouse).
function pointOnLine(page, n, column) {
  return page.evaluate((n, column) => {
    const editor = document.querySelector('.editor-group-container.active .monaco-editor');
    const number = editor && [...editor.querySelectorAll('.line-numbers')].find((e) => e.innerText.trim() === String(n));
    if (!number) return undefined;
    const top = number.getBoundingClientRect().top;
    const row = [...editor.querySelectorAll('.view-lines .view-line')].find((e) => Math.abs(e.getBoundingClientRect().top - top) < 3);
    const text = row && row.querySelector('span');
    if (!text) return undefined;
    const r = text.getBoundingClientRect();
    const w = r.width / Math.max(1, row.innerText.length);  // monospace: one character's width
    return { x: r.left + w * (column - 0.5), y: r.top + r.height / 2 };
  }, n, column);
}

// The text of the visible hover widget(s).
function hoverText(page) {
  return page.$$eval('.monaco-hover', (els) => els.filter((e) => !e.classList.contains('hidden')
    && e.getBoundingClientRect().height > 0).map((e) => e.innerText.replace(/\u00a0/g, ' ')).join('\n'));
}

async function notification(page, start) {
  return page.$$eval('.notifications-toasts .notification-list-item-message',
    (els, start) => els.map((e) => e.innerText.trim()).find((t) => t.startsWith(start)), start);
}

async function tokenMap(page) {
  await openFile(page, CHAT);
  // Hover over line 1's text: the row's map. The hover is asked again (mouse off and
  // back) until the server has judged the file and loaded the tokenizer.
  let tries = 0;
  const hover = await waitFor('the token map hover on line 1', async () => {
    const text = await hoverText(page);
    if (text.includes('Token map')) return text;
    if (tries++ % 8 === 0) {
      const at = await pointOnLine(page, 1, 12);
      if (at) {
        await page.mouse.move(5, 5);
        await page.mouse.move(at.x, at.y);
      }
    }
    return undefined;
  }) || '';
  const lines = hover.split('\n').map((l) => l.trim());
  console.log(`  hover: ${lines.filter((l) => l).slice(0, 4).join(' / ')}`);
  check('chat dataset: hover on line 1 shows the row\'s token map', lines.includes(MAP_HOVER[0]), lines.find((l) => l.startsWith('Token map')));
  check('chat dataset: the hover gives the token counts and where truncation cuts', lines.includes(MAP_HOVER[1]),
    lines.find((l) => l.includes(' tokens, ')));
  check('chat dataset: the hover renders the conversation with the trained tokens marked ⟦ ⟧ and the cut ✂',
    lines.includes(MAP_HOVER[2]), lines.find((l) => l.startsWith('<|user|>')));
  await shot(page, '07-token-map-hover.png');
  await page.mouse.move(5, 5);
  await press(page, 'Escape');

  // The file's lens: percentiles, shares and histogram; clicked, preflight with the map.
  // (the lens's text as drawn: the histogram's empty bins are no-break spaces, kept)
  const lensTexts = await waitFor('the token map code lens', async () => {
    const texts = await page.$$eval('.codelens-decoration a', (els) => els.map((e) => e.innerText));
    return texts.some((t) => t.startsWith('token map')) ? texts : undefined;
  }) || [];
  const mapLens = lensTexts.find((t) => t.startsWith('token map'));
  console.log(`  code lens: ${lensTexts.map((t) => t.trim()).join(' | ')}`);
  const histogram = mapLens && mapLens.slice(MAP_LENS.length);
  check('chat dataset: the "token map" code lens gives p50/p95/p99/max, the share over the max length, cut and train nothing',
    mapLens && mapLens.replace(/\u00a0/g, ' ').startsWith(MAP_LENS), mapLens && mapLens.slice(0, MAP_LENS.length).trim());
  check('chat dataset: the lens draws the length histogram (three rows in bins 6, 8 and 10 of 16)', histogram === MAP_HISTOGRAM,
    histogram !== undefined ? `"${histogram.replace(/\u00a0/g, '·')}" (· an empty bin)` : undefined);
  const clicked = await waitFor('the token map code lens, clicked', async () => {
    const handle = await page.evaluateHandle(() => [...document.querySelectorAll('.codelens-decoration a')]
      .find((a) => a.innerText.trim().startsWith('token map')));
    const lens = handle.asElement();
    if (!lens) return undefined;
    await lens.click();  // throws on a lens drawn again since it was found: waitFor tries again
    return lens;
  });
  const toast = clicked && await waitFor('the preflight result notification', () => notification(page, 'trainproof preflight'));
  check('chat dataset: clicking the lens runs preflight with the run\'s tokenizer (WARN, in a notification)',
    toast && toast.includes('chat.jsonl') && toast.includes('WARN'), toast);
  const rows = await problemsWith(page, 'TP-MAP-RESPONSE-CUT');
  const cut = rows.find((r) => r.includes('TP-MAP-RESPONSE-CUT'));
  check('chat dataset: the lens\'s preflight puts TP-MAP-RESPONSE-CUT in the Problems panel (2 of 3 rows cut)',
    cut && cut.includes('2 of 3 mapped rows (66.7%) lose trained tokens'), cut);
  await shot(page, '08-token-map-lens-and-preflight.png');
}

async function quickFix(page) {
  await openFile(page, SCRIPT);
  const before = fs.readFileSync(SCRIPT, 'utf8').replace(/\n$/, '').split('\n');
  const rows = await problemsWith(page, FIX_RULE);
  const finding = rows.find((r) => r.includes(FIX_RULE));
  check(`train.py: Problems panel shows ${FIX_RULE} at line 7`, finding && finding.includes('[Ln 7,'), finding);
  const squiggle = await waitFor('a squiggle on line 7 of train.py', () => squiggleOnLine(page, 7));
  check('train.py: squiggle on line 7 (load_best_model_at_end=True)', squiggle, squiggle);
  // The cursor into the finding (on "True"), then Quick Fix (Ctrl+.): the menu lists the fix.
  let tries = 0;
  const item = await waitFor(`"${FIX_TITLE}" in the Quick Fix menu`, async () => {
    const items = await page.$$eval('.action-widget .monaco-list-row', (els) => els.map((e) => e.innerText.trim()));
    if (items.some((t) => t === FIX_TITLE || t.startsWith(FIX_TITLE))) return items;
    if (tries++ % 10 === 0) {
      await press(page, 'Escape');
      const at = await pointOnLine(page, 7, 30);
      if (at) await page.mouse.click(at.x, at.y);
      await press(page, 'Control', 'Period');
    }
    return undefined;
  });
  check('train.py: the Quick Fix menu (Ctrl+.) offers the fix', item, item ? item.join(' | ') : undefined);
  await shot(page, '09-quick-fix-menu.png');
  if (item) {
    const row = await page.evaluateHandle((t) => [...document.querySelectorAll('.action-widget .monaco-list-row')]
      .find((e) => e.innerText.trim().startsWith(t)), FIX_TITLE);
    if (row.asElement()) await row.asElement().click();
  }
  const expected = before.map((l, i) => (i + 1 === FIX_LINE ? FIXED_LINE : l));
  const changed = await waitFor('the fix in the buffer', async () => {
    const lines = await editorLines(page);
    return lines && lines[FIX_LINE] === FIXED_LINE ? lines : undefined;
  }, 30000) || await editorLines(page) || {};
  const got = expected.map((_, i) => changed[i + 1]);
  const diff = got.map((l, i) => (l !== before[i] ? `line ${i + 1}: ${JSON.stringify(before[i])} -> ${JSON.stringify(l)}` : null))
    .filter((d) => d);
  check(`train.py: the buffer changed on line ${FIX_LINE} only, to the fix's text`,
    got.every((l, i) => l === expected[i]), diff.join('; ') || 'unchanged');
  await showProblems(page);
  const gone = await waitFor(`${FIX_RULE} to leave the Problems panel`, async () => {
    const panel = await page.$('.markers-panel');
    if (!panel || !(await panel.isVisible())) return undefined;
    const now = await problemRows(page);
    // gone from the panel, and its squiggle from line 7 (the buffer was judged again)
    return now.some((r) => r.includes(FIX_RULE)) || await squiggleOnLine(page, 7) ? undefined : now;
  });
  check(`train.py: after the fix, ${FIX_RULE} is gone from the Problems panel and line 7 has no squiggle`, gone,
    gone ? `${gone.filter((r) => r.includes('TP-')).length} trainproof row(s) left` : undefined);
  await shot(page, '10-quick-fix-applied.png');
  // Saved: the file on disk is the fixed text.
  await page.click('.editor-group-container.active .monaco-editor .view-lines');
  await press(page, 'Control', 'KeyS');
  const saved = await waitFor('train.py saved', () => {
    const text = fs.readFileSync(SCRIPT, 'utf8');
    return text.includes(FIXED_LINE) ? text : undefined;
  }, 20000);
  check('train.py: saved, the file on disk is the fixed text', saved && saved === `${expected.join('\n')}\n`);
}

(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--window-size=1400,900'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    page.on('pageerror', (e) => console.log(`  page error: ${e.message}`));
    if (UNTRUSTED) {
      await untrusted(page);
      return;
    }

    // 1. The dataset: a squiggle and a Problems row with the rule id at the malformed line.
    await openFile(page, DATASET);
    const squiggle = await waitFor(`a squiggle on line ${MALFORMED_LINE} of train.jsonl`, () => squiggleOnLine(page, MALFORMED_LINE));
    check(`dataset: squiggle on line ${MALFORMED_LINE} in the editor`, squiggle, squiggle);
    const datasetRows = await problemsWith(page, 'TP-PRE-MALFORMED-JSONL');
    results.problems.dataset = datasetRows;
    datasetRows.forEach((r) => console.log(`  problem: ${r}`));
    const malformed = datasetRows.find((r) => r.includes('TP-PRE-MALFORMED-JSONL'));
    check('dataset: Problems panel shows TP-PRE-MALFORMED-JSONL', malformed, malformed);
    check(`dataset: the problem is at line ${MALFORMED_LINE}`, malformed && malformed.includes(`[Ln ${MALFORMED_LINE},`), malformed);
    await shot(page, '01-dataset-squiggle-and-problems.png');

    // 2. The diverging run: the verdict code lens, the status bar, and TP-DIVERGE.
    await openFile(page, TRAINER_STATE);
    const lenses = await waitFor('the trainproof code lens', async () => {
      const texts = await page.$$eval('.contentWidgets .codelens-decoration, .codelens-decoration',
        (els) => els.map((e) => e.innerText.replace(/\s+/g, ' ').trim()));
      return texts.some((t) => t.includes('trainproof: FAIL')) ? texts : undefined;
    }) || [];
    results.codeLenses = lenses;
    lenses.forEach((t) => console.log(`  code lens: ${t}`));
    const verdictLens = lenses.find((t) => t.includes('trainproof: FAIL'));
    check('trainer_state.json: code lens with the FAIL verdict', verdictLens, verdictLens);
    check('trainer_state.json: code lens commands (Run doctor, Compare with baseline, Set as baseline)',
      ['Run doctor', 'Compare with baseline', 'Set as baseline'].every((t) => lenses.some((l) => l.includes(t))));
    const status = await waitFor('the status bar verdict', () => page.$$eval('.statusbar-item',
      (els) => els.map((e) => e.innerText.trim()).find((t) => /trainproof: FAIL/.test(t))));
    results.statusBar = status || null;
    check('status bar: worst verdict FAIL', status, status);
    const runRows = await problemsWith(page, 'TP-DIVERGE');
    results.problems.trainerState = runRows;
    runRows.filter((r) => r.includes('TP-')).forEach((r) => console.log(`  problem: ${r}`));
    check('trainer_state.json: Problems panel shows TP-DIVERGE', runRows.some((r) => r.includes('TP-DIVERGE')));
    await shot(page, '02-trainer-state-code-lens.png');
    // Clicking the TP-DIVERGE row reveals its line: the squiggle sits on the log entry of step 120.
    const divergeRow = await page.evaluateHandle(() => [...document.querySelectorAll('.markers-panel .monaco-list-row')]
      .find((r) => r.innerText.includes('TP-DIVERGE') && r.innerText.includes('[Ln ')));
    if (divergeRow.asElement()) {
      await divergeRow.asElement().click();
      await press(page, 'Enter');
    }
    const revealed = await waitFor('a squiggle on line 292', () => squiggleOnLine(page, 292), 20000);
    check('trainer_state.json: TP-DIVERGE squiggle at line 292 (the log entry of step 120)', revealed, revealed);
    await shot(page, '03-trainer-state-diverge-line.png');

    // 3. "Show run": the run report in a webview beside the log, from the code lens (at the
    //    top of the log: back to line 1 first) and from the command palette.
    await page.click('.monaco-editor .view-lines');
    await press(page, 'Control', 'Home');
    const showRunLens = await waitFor('the Show run code lens, clicked', async () => {
      const handle = await page.evaluateHandle(() => [...document.querySelectorAll('.codelens-decoration a')]
        .find((a) => a.innerText.trim() === 'Show run'));
      const lens = handle.asElement();
      if (!lens) return undefined;
      await lens.click();  // throws on a lens drawn again since it was found: waitFor tries again
      return lens;
    });
    check('trainer_state.json: a "Show run" code lens', showRunLens);
    const report = await waitFor('the run report in a webview', () => runReportFrame(page));
    results.runReport = report ? { title: report.title, charts: report.charts } : null;
    check('Show run (code lens): the run report with its charts in a webview', report,
      report ? `${report.charts} chart(s); page title "${report.title}"` : undefined);
    check('Show run: the report names TP-DIVERGE', report && report.text.includes('TP-DIVERGE'));
    const tabs = await editorTabs(page);
    check(`Show run: a tab "${RUN_TITLE}" beside the log`, tabs.includes(RUN_TITLE) && tabs.includes('trainer_state.json'),
      tabs.join(' | '));
    await shot(page, '04-show-run-webview.png');
    // Closed (middle click on its tab), then opened again from the palette for the active log.
    const runTab = await page.evaluateHandle((title) => [...document.querySelectorAll('.tab')]
      .find((t) => t.querySelector('.label-name')?.textContent.trim() === title), RUN_TITLE);
    if (runTab.asElement()) await runTab.asElement().click({ button: 'middle' });
    const closed = await waitFor('the run report tab to close', async () =>
      !(await editorTabs(page)).includes(RUN_TITLE) && !(await runReportFrame(page)), 20000);
    await runCommand(page, 'trainproof: Show run');
    const again = closed && await waitFor('the run report again', () => runReportFrame(page));
    const tabsAgain = await editorTabs(page);
    check('Show run (command palette): the run report again, in one tab',
      again && tabsAgain.filter((t) => t === RUN_TITLE).length === 1, tabsAgain.join(' | '));

    // 4. The output channel: the server runs from the bundled copy.
    await runCommand(page, 'trainproof: Show output');
    // The panel's editor wraps long lines: read its visible lines as one text.
    const output = await waitFor('the server log in the output channel', async () => {
      // (the editor renders spaces as no-break spaces)
      const text = await page.$$eval('.part.panel .monaco-editor .view-line',
        (els) => els.map((e) => e.innerText.replace(/\u00a0/g, ' ')).join(''));
      return text.includes('server started') ? text : undefined;
    }, 30000) || '';
    results.output = output;
    const started = /starting the server[^\n]*?\]/.exec(output.replace(/\s+/g, ' '));
    console.log(`  output: ${started ? started[0] : '(no start line)'}`);
    check('output channel: the server started from the bundled copy', started && started[0].includes('bundled copy'),
      started ? started[0] : undefined);
    await shot(page, '05-output-channel.png');

    // 5. A log with bare NaN: only trainproof's problems.
    await nanLogProblems(page, '');
    await shot(page, '06-nan-log-problems.png');

    // 6. The trained-tokens map: hover and code lens.
    await tokenMap(page);

    // 7. One quick fix, applied from the Quick Fix menu.
    await quickFix(page);
  } finally {
    await browser.close();
    fs.writeFileSync(path.join(artifacts, UNTRUSTED ? 'untrusted-result.json' : 'result.json'), JSON.stringify(results, null, 2));
  }
})().then(() => {
  const failed = results.checks.filter((c) => !c.ok);
  console.log(`${results.checks.length - failed.length} passed, ${failed.length} failed`);
  process.exit(failed.length ? 1 : 0);
}).catch((e) => {
  console.error(e);
  process.exit(2);
});
