// Activation only: the parts live in common/ (server.ts, settings.ts, python.ts,
// logging.ts, status.ts, commands.ts, runPanel.ts).
import { ExtensionContext, window, workspace } from 'vscode';
import { registerCommands } from './common/commands';
import { SERVER_COMMANDS, SERVER_NAME } from './common/constants';
import { registerLogger, traceInfo } from './common/logging';
import { onDidChangePythonInterpreter } from './common/python';
import { CommandFindings } from './common/findings';
import { RunPanels } from './common/runPanel';
import { ServerController } from './common/server';
import { affectsServerSettings, needsRestart, serverSettingNames } from './common/settings';
import { VerdictStatus } from './common/status';

let controller: ServerController | undefined;

export async function activate(context: ExtensionContext): Promise<void> {
    const output = window.createOutputChannel(SERVER_NAME, { log: true });
    context.subscriptions.push(output, registerLogger(output));
    traceInfo(`trainproof ${context.extension.packageJSON.version} activating (workspace ${workspace.isTrusted ? 'trusted' : 'untrusted'})`);

    const status = new VerdictStatus();
    const runPanels = new RunPanels();
    // Run doctor and Compare, from the palette or a code lens: their findings in the Problems panel.
    const findings = new CommandFindings();
    const names = serverSettingNames(context.extension.packageJSON);
    controller = new ServerController({
        extensionRoot: context.extensionPath,
        output,
        serverSettingNames: names,
        onState: (state, detail) => status.setServerState(state, detail),
        presenters: {
            [SERVER_COMMANDS.showRun]: (args, send) => runPanels.show(args, send),
            [SERVER_COMMANDS.doctor]: findings.presenter(SERVER_COMMANDS.doctor),
            [SERVER_COMMANDS.compare]: findings.presenter(SERVER_COMMANDS.compare),
        },
    });
    const server = controller;
    context.subscriptions.push(status, runPanels, findings, server);

    context.subscriptions.push(
        ...registerCommands({
            output,
            execute: (command, args) => server.execute(command, args),
            restart: (reason) => server.restart(reason),
            onDoctorResult: (verdict) => status.setDoctorVerdict(verdict),
            onResult: (command, result) => findings.show(command, result),
        }),
        workspace.onDidChangeConfiguration(async (e) => {
            if (needsRestart(e)) {
                await server.restart('interpreter settings changed');
            } else if (e.affectsConfiguration('trainproof.jsonAndPython')) {
                await server.restart('trainproof.jsonAndPython changed');
            } else if (affectsServerSettings(e, names)) {
                await server.settingsChanged();
            }
        }),
        workspace.onDidGrantWorkspaceTrust(() => server.restart('workspace trusted')),
    );
    const pythonChanged = await onDidChangePythonInterpreter(() => server.restart('Python interpreter changed'));
    if (pythonChanged) {
        context.subscriptions.push(pythonChanged);
    }
    await server.restart('activation');
}

export async function deactivate(): Promise<void> {
    await controller?.stop();
    controller = undefined;
}
