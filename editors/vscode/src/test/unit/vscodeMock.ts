// A stand-in for the `vscode` module in unit tests (there is no VS Code host under mocha).
// Only what the client's modules touch is modelled; tests change `state` and stub the
// functions with sinon. Anything else resolves to an inert class, so that modules such as
// vscode-languageclient can be loaded.
import * as path from 'path';

export class Uri {
    private constructor(readonly scheme: string, readonly fsPath: string) {}
    static file(p: string): Uri { return new Uri('file', path.resolve(p)); }
    static parse(s: string): Uri {
        const m = /^([a-z-]+):\/\/(.*)$/.exec(s);
        return m ? new Uri(m[1], m[1] === 'file' ? decodeURIComponent(m[2]) : m[2]) : new Uri('file', s);
    }
    get path(): string { return this.fsPath; }
    toString(): string { return `${this.scheme}://${this.fsPath}`; }
}

export class EventEmitter<T> {
    private listeners: ((e: T) => unknown)[] = [];
    event = (listener: (e: T) => unknown) => {
        this.listeners.push(listener);
        return { dispose: () => { this.listeners = this.listeners.filter((l) => l !== listener); } };
    };
    fire(e: T): void { this.listeners.forEach((l) => l(e)); }
    dispose(): void { this.listeners = []; }
}

/** A webview panel as window.createWebviewPanel makes it; `revealed` records reveal() calls. */
export class WebviewPanel {
    readonly webview: { html: string; options: unknown };
    readonly revealed: [unknown, boolean | undefined][] = [];
    disposed = false;
    active = false;
    private readonly disposeEmitter = new EventEmitter<void>();
    readonly onDidDispose = this.disposeEmitter.event;

    constructor(readonly viewType: string, public title: string, readonly showOptions: unknown, readonly options: unknown) {
        this.webview = { html: '', options };
    }
    reveal(viewColumn?: unknown, preserveFocus?: boolean): void { this.revealed.push([viewColumn, preserveFocus]); }
    dispose(): void {
        if (!this.disposed) {
            this.disposed = true;
            this.disposeEmitter.fire();
        }
    }
}

export class Position {
    constructor(readonly line: number, readonly character: number) {}
}

export class Range {
    constructor(readonly start: Position, readonly end: Position) {}
}

export class Diagnostic {
    source?: string;
    code?: string | number;
    constructor(readonly range: Range, readonly message: string, readonly severity: number) {}
}

/** languages.createDiagnosticCollection's collection: what is set, by file path. */
export class DiagnosticCollection {
    readonly entries = new Map<string, Diagnostic[]>();
    disposed = false;
    constructor(readonly name: string) {}
    set(uri: Uri, diagnostics: Diagnostic[]): void { this.entries.set(uri.fsPath, diagnostics); }
    clear(): void { this.entries.clear(); }
    dispose(): void { this.disposed = true; this.entries.clear(); }
}

export interface MockState {
    configuration: Record<string, unknown>;
    isTrusted: boolean;
    workspaceFolders: { uri: Uri; name: string; index: number }[] | undefined;
    extensions: Record<string, unknown>;
    diagnostics: [Uri, unknown[]][];
    activeFile: Uri | undefined;
    files: Record<string, string>;
    panels: WebviewPanel[];
    collections: DiagnosticCollection[];
    executed: [string, unknown[]][];
    /** getConfiguration(...).update calls: [section.key, value, target]. */
    updates: [string, unknown, unknown][];
}

export const state: MockState = {
    configuration: {}, isTrusted: true, workspaceFolders: undefined, extensions: {}, diagnostics: [],
    activeFile: undefined, files: {}, panels: [], collections: [], executed: [], updates: [],
};

export function resetState(): void {
    Object.assign(state, {
        configuration: {}, isTrusted: true, workspaceFolders: undefined, extensions: {}, diagnostics: [],
        activeFile: undefined, files: {}, panels: [], collections: [], executed: [], updates: [],
    });
}

const noop = () => ({ dispose() { /* nothing */ } });

export const registeredCommands = new Map<string, (...args: unknown[]) => unknown>();

function statusBarItem() {
    return { text: '', tooltip: '', command: undefined, backgroundColor: undefined, name: '', show() {}, hide() {}, dispose() {} };
}

function watcher() {
    return { onDidCreate: noop, onDidChange: noop, onDidDelete: noop, dispose() {} };
}

const base = {
    Uri,
    EventEmitter,
    Position,
    Range,
    Diagnostic,
    StatusBarAlignment: { Left: 1, Right: 2 },
    ConfigurationTarget: { Global: 1, Workspace: 2, WorkspaceFolder: 3 },
    ViewColumn: { Active: -1, Beside: -2, One: 1, Two: 2 },
    DiagnosticSeverity: { Error: 0, Warning: 1, Information: 2, Hint: 3 },
    ThemeColor: class { constructor(readonly id: string) {} },
    Disposable: class { constructor(private readonly fn: () => void) {} dispose() { this.fn(); } static from() { return { dispose() {} }; } },
    workspace: {
        getConfiguration: (section: string) => ({
            get: <T>(key: string, fallback?: T): T => {
                const full = `${section}.${key}`;
                return (full in state.configuration ? state.configuration[full] : fallback) as T;
            },
            update: async (key: string, value: unknown, target?: unknown) => {
                state.updates.push([`${section}.${key}`, value, target]);
            },
        }),
        get isTrusted() { return state.isTrusted; },
        get workspaceFolders() { return state.workspaceFolders; },
        onDidChangeConfiguration: noop,
        onDidGrantWorkspaceTrust: noop,
        createFileSystemWatcher: watcher,
        findFiles: async () => [] as Uri[],
        fs: { readFile: async (uri: Uri) => Buffer.from(state.files[uri.fsPath] ?? '') },
    },
    window: {
        createOutputChannel: () => ({ appendLine() {}, info() {}, warn() {}, error() {}, debug() {}, show() {}, dispose() {} }),
        createStatusBarItem: statusBarItem,
        showWarningMessage: async () => undefined,
        showErrorMessage: async () => undefined,
        showInformationMessage: async () => undefined,
        showWorkspaceFolderPick: async () => undefined,
        createWebviewPanel: (viewType: string, title: string, showOptions: unknown, options: unknown) => {
            const panel = new WebviewPanel(viewType, title, showOptions, options);
            state.panels.push(panel);
            return panel;
        },
        get activeTextEditor() { return state.activeFile ? { document: { uri: state.activeFile } } : undefined; },
    },
    languages: {
        getDiagnostics: () => state.diagnostics,
        onDidChangeDiagnostics: noop,
        createDiagnosticCollection: (name: string) => {
            const collection = new DiagnosticCollection(name);
            state.collections.push(collection);
            return collection;
        },
    },
    extensions: {
        getExtension: (id: string) => state.extensions[id],
    },
    commands: {
        registerCommand: (id: string, handler: (...args: unknown[]) => unknown) => {
            registeredCommands.set(id, handler);
            return { dispose: () => registeredCommands.delete(id) };
        },
        executeCommand: async (id: string, ...args: unknown[]) => { state.executed.push([id, args]); return undefined; },
    },
};

/** The module object: known members from `base`, anything else an inert class. */
export const vscode: typeof base & Record<string, unknown> = new Proxy(base, {
    get(target, prop: string | symbol) {
        if (prop in target) {
            return (target as Record<string | symbol, unknown>)[prop];
        }
        if (typeof prop === 'symbol' || prop === 'then' || prop === '__esModule') {
            return undefined;
        }
        const inert = class {};
        (target as Record<string, unknown>)[prop] = inert;
        return inert;
    },
}) as typeof base & Record<string, unknown>;
