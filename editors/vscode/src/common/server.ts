// The language server process: how it is launched (which Python, which copy of
// trainproof-lsp) and one LanguageClient at a time, restarted when the interpreter, the
// import strategy or the workspace's trust changes.
import * as fs from 'fs';
import * as path from 'path';
import { Disposable, LogOutputChannel, Uri, window, workspace } from 'vscode';
import {
    ConfigurationParams, DidChangeConfigurationNotification, ExecuteCommandRequest,
    LanguageClient, LanguageClientOptions, RevealOutputChannelOn, ServerOptions, State,
} from 'vscode-languageclient/node';
import {
    ARTEFACT_GLOBS, ARTEFACT_SEARCH_EXCLUDE, DOCUMENT_PATTERN, OWNED_DOCUMENT_PATTERN, SECTION, SERVER_COMMANDS, SERVER_ID,
    SERVER_NAME, WATCHED_GLOBS,
} from './constants';
import { traceError, traceInfo, traceLog, traceWarn } from './logging';
import { Interpreter, checkPythonVersion, interpreterFromPythonExtension, resolveInterpreter } from './python';
import { bundledLibsPath, serverLaunch } from './launch';
import { getClientSettings, getServerSettings, withWorkspacePython } from './settings';
import { bundledServerProblem } from './bundle';

export { ServerLaunch, bundledLibsPath, serverLaunch } from './launch';

/** Answers the server's workspace/configuration for our section with the server's keys
 *  only (it warns about keys it does not know) and the trust overrides. */
export function configurationAnswer(params: ConfigurationParams, fromNext: unknown[],
    settingsFor: (scopeUri: string | undefined) => Record<string, unknown>): unknown[] {
    return params.items.map((item, i) => (item.section === SECTION ? settingsFor(item.scopeUri) : fromNext[i]));
}

export type ServerState = 'starting' | 'running' | 'stopped' | 'failed';

/** How long the search for training artefacts may take before the server starts without them. */
export const ARTEFACT_SEARCH_MS = 5000;

export type FindFiles = (include: string, exclude: string, maxResults: number) => Thenable<readonly unknown[]>;

/** Whether the server gets every JSON, CSV and Python file of the workspace, and why: the
 *  `trainproof.jsonAndPython` setting is "always", or ("auto") the workspace holds a
 *  training artefact (ARTEFACT_GLOBS, the files the manifest activates on). Otherwise it
 *  gets only the files the tool owns (OWNED_DOCUMENT_PATTERN). */
export async function judgesEveryJsonAndPython(setting: unknown, findFiles: FindFiles,
    timeoutMs = ARTEFACT_SEARCH_MS): Promise<{ every: boolean; why: string }> {
    if (setting === 'always') {
        return { every: true, why: 'trainproof.jsonAndPython is "always"' };
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), timeoutMs); });
    try {
        const found = await Promise.race([findFiles(`{${ARTEFACT_GLOBS.join(',')}}`, ARTEFACT_SEARCH_EXCLUDE, 1), timedOut]);
        if (found === 'timeout') {
            return { every: false, why: `no training artefact found in ${timeoutMs / 1000} s` };
        }
        return found.length > 0
            ? { every: true, why: `the workspace holds training artefacts (${String((found[0] as { fsPath?: string }).fsPath ?? found[0])})` }
            : { every: false, why: 'the workspace holds no training artefact' };
    } catch (e) {
        return { every: false, why: `the search for training artefacts failed (${e})` };
    } finally {
        clearTimeout(timer);
    }
}

/** The documents the server is sent: every JSON, CSV and Python file, or the tool's own. */
export function documentSelector(every: boolean): { scheme: string; pattern: string }[] {
    return [{ scheme: 'file', pattern: every ? DOCUMENT_PATTERN : OWNED_DOCUMENT_PATTERN }];
}

/** Shows a server command's answer: called with the command's arguments and `send`, which
 *  runs the command on the server; its result is the command's result. */
export type Presenter = (args: unknown[], send: (args: unknown[]) => Promise<unknown>) => Promise<unknown>;

export interface ServerHost {
    extensionRoot: string;
    output: LogOutputChannel;
    serverSettingNames: string[];
    onState(state: ServerState, detail?: string): void;
    /** Server commands the client presents (PRESENTED_SERVER_COMMANDS), by id. */
    presenters?: Readonly<Record<string, Presenter>>;
}

type ExecuteCommand = (command: string, args: unknown[]) => unknown;

/** The executeCommand middleware: a command with a presenter goes through it (whether a code
 *  lens or the palette ran it), every other command straight to the server. */
export function executeCommandMiddleware(presenters: Readonly<Record<string, Presenter>>) {
    return (command: string, args: unknown[], next: ExecuteCommand): unknown => {
        const present = presenters[command];
        return present ? present(args, async (sent) => next(command, sent)) : next(command, args);
    };
}

/** initializationOptions: the server's settings, and under `clientFeatures` what this client
 *  does that LSP has no capability for (the server's ClientFeatures reads it; it is no
 *  setting). With a Show run presenter the page is shown here, in a panel, so the server
 *  neither writes it to a file nor asks for a browser (window/showDocument). */
export function initializationOptions(settings: Record<string, unknown>,
    presenters: Readonly<Record<string, Presenter>>): Record<string, unknown> {
    return { ...settings, clientFeatures: { showRunPanel: SERVER_COMMANDS.showRun in presenters } };
}

/** One LanguageClient at a time. start/restart/stop are serialised. */
export class ServerController implements Disposable {
    private client: LanguageClient | undefined;
    private disposables: Disposable[] = [];
    private queue: Promise<unknown> = Promise.resolve();
    private interpreter: Interpreter | undefined;

    constructor(private readonly host: ServerHost) {}

    get current(): LanguageClient | undefined {
        return this.client;
    }

    restart(reason: string): Promise<void> {
        const next = this.queue.then(async () => {
            await this.stopNow();
            await this.startNow(reason);
        });
        this.queue = next.catch(() => undefined);
        return next;
    }

    stop(): Promise<void> {
        const next = this.queue.then(() => this.stopNow());
        this.queue = next.catch(() => undefined);
        return next;
    }

    /** Tell the running server that its settings changed (it re-reads them). */
    async settingsChanged(): Promise<void> {
        if (this.client?.state === State.Running) {
            await this.client.sendNotification(DidChangeConfigurationNotification.type, { settings: null });
        }
    }

    /** workspace/executeCommand on the server, or undefined (with a message) when it is not running. */
    async execute(command: string, args: unknown[]): Promise<unknown> {
        if (this.client?.state !== State.Running) {
            void window.showWarningMessage('trainproof: the language server is not running (see "trainproof: Show output").');
            return undefined;
        }
        return this.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
    }

    private async startNow(reason: string): Promise<void> {
        const folder = workspace.workspaceFolders?.[0];
        const trusted = workspace.isTrusted;
        const settings = getClientSettings(folder, trusted);
        this.host.onState('starting');
        this.interpreter = await resolveInterpreter(settings.interpreter, folder, trusted);
        const problem = await checkPythonVersion(this.interpreter.command);
        if (problem) {
            traceError(problem);
            this.host.onState('failed', problem);
            void window.showErrorMessage(`trainproof: ${problem}`, 'Show output').then((choice) => {
                if (choice) {
                    this.host.output.show();
                }
            });
            return;
        }
        const libs = bundledLibsPath(this.host.extensionRoot);
        const haveBundle = fs.existsSync(path.join(libs, 'trainproof_lsp'));
        if (settings.importStrategy === 'useBundled' && !haveBundle) {
            traceWarn(`no bundled server in ${libs} (a development build?): using the interpreter's own trainproof-lsp`);
        }
        // The extension's own folder, never the workspace (launch.ts).
        // A .vsix for another platform: say which one to install (common/bundle.ts).
        const misfit = settings.importStrategy === 'useBundled' && haveBundle ? bundledServerProblem(libs) : undefined;
        if (misfit) {
            traceError(misfit);
            this.host.onState('failed', misfit);
            void window.showErrorMessage(`trainproof: ${misfit}`, 'Show output').then((choice) => {
                if (choice) {
                    this.host.output.show();
                }
            });
            return;
        }
        const launch = serverLaunch(this.interpreter.command, settings.importStrategy, haveBundle ? libs : undefined,
            this.host.extensionRoot);
        traceInfo(`starting the server (${reason}): ${[launch.command, ...launch.args].join(' ')} ` +
            `[interpreter from ${this.interpreter.source}; ${launch.bundled ? `bundled copy in ${libs}` : 'trainproof-lsp from the environment'}` +
            `${trusted ? '' : '; Restricted Mode: static checks only, Check environment off'}]`);

        const serverOptions: ServerOptions = {
            command: launch.command,
            args: launch.args,
            options: { cwd: launch.cwd, env: launch.env },
        };
        const names = this.host.serverSettingNames;
        // Check environment probes with the workspace's interpreter (trusted workspaces only).
        const selected = trusted ? await interpreterFromPythonExtension(folder) : undefined;
        const settingsFor = (scopeUri: string | undefined) => withWorkspacePython(
            getServerSettings(names, scopeUri ? Uri.parse(scopeUri) : folder, workspace.isTrusted), selected,
            workspace.isTrusted);
        const { every, why } = await judgesEveryJsonAndPython(
            workspace.getConfiguration(SECTION, folder).get('jsonAndPython', 'auto'),
            (include, exclude, max) => workspace.findFiles(include, exclude, max));
        traceInfo(every ? `every JSON, CSV and Python file is checked: ${why}`
            : `only the files trainproof owns are checked: ${why} (JSON, CSV and Python files too: "trainproof: ` +
              'Check JSON and Python files in this workspace" or the setting trainproof.jsonAndPython)');
        const watchers = WATCHED_GLOBS.map((glob) => workspace.createFileSystemWatcher(glob));
        this.disposables.push(...watchers);
        const clientOptions: LanguageClientOptions = {
            documentSelector: documentSelector(every),
            outputChannel: this.host.output,
            traceOutputChannel: this.host.output,
            revealOutputChannelOn: RevealOutputChannelOn.Never,
            initializationOptions: initializationOptions(settingsFor(undefined), this.host.presenters ?? {}),
            synchronize: { fileEvents: watchers },
            middleware: {
                executeCommand: executeCommandMiddleware(this.host.presenters ?? {}),
                workspace: {
                    configuration: async (params, token, next) => {
                        const fromNext = await next(params, token);
                        return Array.isArray(fromNext) ? configurationAnswer(params, fromNext, settingsFor) : fromNext;
                    },
                },
            },
        };
        const client = new LanguageClient(SERVER_ID, SERVER_NAME, serverOptions, clientOptions);
        this.client = client;
        this.disposables.push(client.onDidChangeState((e) => {
            if (e.newState === State.Running) {
                this.host.onState('running');
            } else if (e.newState === State.Stopped) {
                this.host.onState('stopped');
            }
        }));
        try {
            await client.start();
            traceLog('server started');
        } catch (e) {
            traceError(`the server did not start: ${e}`);
            this.host.onState('failed', String(e));
        }
    }

    private async stopNow(): Promise<void> {
        const client = this.client;
        this.client = undefined;
        if (client) {
            try {
                await client.stop(5000);
            } catch (e) {
                traceError(`stopping the server: ${e}`);
            }
            try {
                await client.dispose();
            } catch {
                // already disposed
            }
        }
        for (const d of this.disposables.splice(0)) {
            d.dispose();
        }
    }

    dispose(): void {
        void this.stop();
    }
}
