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
export const CLIENT_ONLY_SETTINGS: readonly string[] = ['interpreter', 'importStrategy', 'trace.server', 'jsonAndPython'];

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
    checkJsonAndPython: 'trainproof.checkJsonAndPython',
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
    '**/*.wandb',
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

/** Files that mark a workspace as holding training artefacts: a run's logs and checkpoints
 *  and a model's tokenizer and configs, by the names the table of formats
 *  (trainproof_lsp/core/formats.py) gives them — never a name any project has
 *  (`config.json`). package.json activates the extension on them (`workspaceContains:`),
 *  and only in such a workspace (or when the user asks: `trainproof.jsonAndPython`) does
 *  the server get every JSON and Python file. tests/test_vscode_activation.py checks this
 *  list against the table and package.json. */
export const ARTEFACT_GLOBS: readonly string[] = [
    '**/trainer_state.json',
    '**/events.out.tfevents.*',
    '**/tokenizer_config.json',
    '**/special_tokens_map.json',
    '**/tokenizer.json',
    '**/chat_template.jinja',
    '**/chat_template.json',
    '**/generation_config.json',
    '**/adapter_config.json',
    '**/metrics.csv',
    '**/metrics.jsonl',
    '**/hparams.yaml',
    '**/*.ckpt',
    '**/*.safetensors',
    '**/trainproof-verdict.jsonl',
];

/** The documents the server judges in any workspace: the files the tool owns by name
 *  (ARTEFACT_GLOBS that are opened formats) and by its own languages (JSON Lines, a
 *  tokenizer's chat template). Any other JSON, CSV or Python file only where the workspace
 *  holds training artefacts (DOCUMENT_PATTERN). Checked by tests/test_vscode_activation.py. */
export const OWNED_DOCUMENT_PATTERN =
    '**/{trainer_state.json,tokenizer_config.json,special_tokens_map.json,tokenizer.json,chat_template.json,' +
    'generation_config.json,adapter_config.json,metrics.csv,*.jsonl,*.ndjson,*.jinja}';

/** Folders the artefact search passes over (the table's SKIPPED_FOLDERS that hold no run of the user's). */
export const ARTEFACT_SEARCH_EXCLUDE = '**/{node_modules,.venv,venv,site-packages,dist-packages,.git}/**';
