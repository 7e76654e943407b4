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
