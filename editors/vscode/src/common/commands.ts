// The palette and context-menu commands. The server's commands need a path argument
// (trainproof_lsp/server/commands.py); these find it (the clicked resource, the active
// editor, the workspace folder) and call the server with workspace/executeCommand.
import { ConfigurationTarget, Disposable, LogOutputChannel, Uri, WorkspaceFolder, commands, window, workspace } from 'vscode';
import { CLIENT_COMMANDS, SECTION, SERVER_COMMANDS } from './constants';
import { traceInfo } from './logging';

export interface CommandHost {
    output: LogOutputChannel;
    execute(command: string, args: unknown[]): Promise<unknown>;
    restart(reason: string): Promise<void>;
    onDoctorResult(worstVerdict: unknown): void;
    /** A server command's answer (Run doctor, Compare: their findings go to the Problems panel). */
    onResult(command: string, result: unknown): Promise<void> | void;
}

/** The folder "Run doctor on folder" judges: the clicked folder, else the only workspace
 *  folder, else undefined (the user picks one). */
export function doctorTarget(clicked: Uri | undefined, folders: readonly WorkspaceFolder[] | undefined): string | undefined {
    if (clicked && clicked.scheme === 'file') {
        return clicked.fsPath;
    }
    return folders && folders.length === 1 ? folders[0].uri.fsPath : undefined;
}

/** The file a file command works on: the clicked one, else the active editor's. */
export function fileTarget(clicked: Uri | undefined, active: Uri | undefined): string | undefined {
    const uri = clicked ?? active;
    return uri && uri.scheme === 'file' ? uri.fsPath : undefined;
}

function activeFile(): Uri | undefined {
    return window.activeTextEditor?.document.uri;
}

interface CommandResult {
    status?: string;
    message?: string;
    worst_verdict?: string;
}

export function registerCommands(host: CommandHost): Disposable[] {
    const run = async (command: string, args: unknown[]): Promise<CommandResult | undefined> => {
        traceInfo(`${command} ${JSON.stringify(args)}`);
        const result = (await host.execute(command, args)) as CommandResult | undefined;
        if (result?.message) {
            traceInfo(`${command}: ${result.status}: ${result.message}`);
        }
        await host.onResult(command, result);
        return result;
    };
    const needFile = (what: string) => void window.showWarningMessage(`trainproof: ${what}: open or select a file first`);

    return [
        commands.registerCommand(CLIENT_COMMANDS.runDoctorOnFolder, async (clicked?: Uri) => {
            let target = doctorTarget(clicked, workspace.workspaceFolders);
            if (!target) {
                const folder = await window.showWorkspaceFolderPick({ placeHolder: 'Folder to run trainproof doctor on' });
                target = folder?.uri.fsPath;
            }
            if (!target) {
                return undefined;
            }
            const result = await run(SERVER_COMMANDS.doctor, [target]);
            host.onDoctorResult(result?.worst_verdict);
            return result;
        }),
        commands.registerCommand(CLIENT_COMMANDS.compareWithBaseline, async (clicked?: Uri) => {
            const target = fileTarget(clicked, activeFile());
            return target ? run(SERVER_COMMANDS.compare, [target]) : needFile('Compare with baseline');
        }),
        commands.registerCommand(CLIENT_COMMANDS.setAsBaseline, async (clicked?: Uri) => {
            const target = fileTarget(clicked, activeFile());
            return target ? run(SERVER_COMMANDS.setBaseline, [target]) : needFile('Set as baseline');
        }),
        commands.registerCommand(CLIENT_COMMANDS.checkEnvironmentOfScript, async (clicked?: Uri) => {
            if (!workspace.isTrusted) {
                void window.showWarningMessage('trainproof: Check environment imports the script\'s modules; trust this workspace first.');
                return undefined;
            }
            const target = fileTarget(clicked, activeFile());
            return target ? run(SERVER_COMMANDS.checkEnvironment, [target]) : needFile('Check environment');
        }),
        commands.registerCommand(CLIENT_COMMANDS.restartServer, () => host.restart('restart command')),
        // The user asks for every JSON, CSV and Python file here, artefacts or not: the
        // workspace's setting (a folder-less window: the user's); its change restarts the server.
        commands.registerCommand(CLIENT_COMMANDS.checkJsonAndPython, async () => {
            const config = workspace.getConfiguration(SECTION);
            if (config.get<string>('jsonAndPython', 'auto') === 'always') {
                void window.showInformationMessage('trainproof: every JSON, CSV and Python file is checked already (trainproof.jsonAndPython).');
                return;
            }
            await config.update('jsonAndPython', 'always',
                workspace.workspaceFolders?.length ? ConfigurationTarget.Workspace : ConfigurationTarget.Global);
        }),
        commands.registerCommand(CLIENT_COMMANDS.showOutput, () => host.output.show()),
        commands.registerCommand(CLIENT_COMMANDS.serverInfo, async () => {
            const info = await run(SERVER_COMMANDS.showServerInfo, []);
            if (info) {
                host.output.appendLine(JSON.stringify(info, null, 2));
                host.output.show(true);
            }
            return info;
        }),
    ];
}
