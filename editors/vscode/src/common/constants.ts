// Names shared by the client's modules. Server command ids are the server's own
// (trainproof_lsp/server/commands.py); the client's palette commands wrap them under
// other ids, because vscode-languageclient registers every server command itself. A server
// command whose answer the client shows keeps its id (PRESENTED_SERVER_COMMANDS).

export { BUNDLED_LIBS_DIR } from './launch';
export const SECTION = 'trainproof';
export const SERVER_ID = 'trainproof';
export const SERVER_NAME = 'trainproof';
export const MIN_PYTHON: readonly [number, number] = [3, 10];

/** Settings the client reads itself; every other `trainproof.*` setting goes to the server. */
export const CLIENT_ONLY_SETTINGS: readonly string[] = ['interpreter', 'importStrategy', 'trace.server'];

export const SERVER_COMMANDS = {
    doctor: 'trainproof.doctor',
    compare: 'trainproof.compare',
    setBaseline: 'trainproof.setBaseline',
    checkEnvironment: 'trainproof.checkEnvironment',
    showRun: 'trainproof.showRun',
    showServerInfo: 'trainproof.showServerInfo',
} as const;

/** Server commands whose answer the client shows itself, under the server's own id: code
 *  lenses name them, vscode-languageclient registers them, and the client's middleware
 *  takes their result (Show run: the page in a webview). Contributed to the palette too. */
export const PRESENTED_SERVER_COMMANDS: readonly string[] = [SERVER_COMMANDS.showRun];

export const CLIENT_COMMANDS = {
    runDoctorOnFolder: 'trainproof.runDoctorOnFolder',
    compareWithBaseline: 'trainproof.compareWithBaseline',
    setAsBaseline: 'trainproof.setAsBaseline',
    checkEnvironmentOfScript: 'trainproof.checkEnvironmentOfScript',
    restartServer: 'trainproof.restartServer',
    showOutput: 'trainproof.showOutput',
    serverInfo: 'trainproof.serverInfo',
} as const;

/** Files whose changes the server hears about (didChangeWatchedFiles): a run that writes
 *  them is re-judged while it trains. The verdict stream also feeds the status bar.
 *  The table of formats (trainproof_lsp/core/formats.py, `watched`) is the definition;
 *  tests/test_formats.py fails when this list drifts from it. */
export const WATCHED_GLOBS: readonly string[] = [
    '**/trainer_state.json',
    '**/events.out.tfevents.*',
    '**/*.csv',
    '**/*.tsv',
    '**/*.jsonl',
    '**/*.ndjson',
    '**/*.json',
    '**/*.txt',
    '**/*.log',
    '**/*.pt',
    '**/*.pth',
    '**/*.ckpt',
    '**/*.bin',
    '**/*.safetensors',
    '**/*.tar',
    '**/*.pkl',
    '**/*.pickle',
    '**/*.joblib',
    '**/trainproof-verdict.jsonl',
];
export const VERDICT_STREAM_GLOB = '**/trainproof-verdict.jsonl';

/** Documents the server judges: training logs, datasets, training scripts, model and
 *  tokenizer configs (a tokenizer's chat_template.jinja included): the `opened` formats of
 *  trainproof_lsp/core/formats.py, checked by tests/test_formats.py. */
export const DOCUMENT_PATTERN = '**/*.{json,jsonl,ndjson,csv,tsv,py,jinja}';
