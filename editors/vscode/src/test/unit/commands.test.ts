import * as assert from 'assert';
import * as sinon from 'sinon';
import { doctorTarget, fileTarget, registerCommands } from '../../common/commands';
import { CLIENT_COMMANDS, SERVER_COMMANDS } from '../../common/constants';
import { Uri as MockUri, registeredCommands, resetState, state } from './vscodeMock';

// The mock's Uri stands in for vscode.Uri.
const Uri = { file: (p: string) => MockUri.file(p) as never, parse: (s: string) => MockUri.parse(s) as never };
const file = (p: string) => MockUri.file(p).fsPath;

function host() {
    return {
        output: { show: sinon.spy(), appendLine: sinon.spy() },
        execute: sinon.stub().resolves({ status: 'done', worst_verdict: 'FAIL', message: 'trainproof doctor: FAIL' }),
        restart: sinon.stub().resolves(),
        onDoctorResult: sinon.spy(),
        onResult: sinon.spy(),
    };
}

describe('commands', () => {
    let disposables: { dispose(): void }[] = [];
    beforeEach(resetState);
    afterEach(() => { disposables.forEach((d) => d.dispose()); disposables = []; });

    it('runs doctor on the clicked folder, else the only workspace folder', () => {
        const ws = { uri: Uri.file('/ws'), name: 'ws', index: 0 } as never;
        assert.strictEqual(doctorTarget(Uri.file('/ws/runs'), [ws]), file('/ws/runs'));
        assert.strictEqual(doctorTarget(undefined, [ws]), file('/ws'));
        assert.strictEqual(doctorTarget(undefined, [ws, { ...(ws as object), index: 1 } as never]), undefined);
        assert.strictEqual(doctorTarget(undefined, undefined), undefined);
    });

    it('works on the clicked file, else the active editor\'s, never on a non-file document', () => {
        assert.strictEqual(fileTarget(Uri.file('/a.json'), Uri.file('/b.json')), file('/a.json'));
        assert.strictEqual(fileTarget(undefined, Uri.file('/b.json')), file('/b.json'));
        assert.strictEqual(fileTarget(undefined, Uri.parse('untitled://Untitled-1')), undefined);
    });

    it('calls the server\'s command with the path and feeds doctor\'s verdict to the status bar', async () => {
        const h = host();
        disposables = registerCommands(h as never);
        state.workspaceFolders = [{ uri: MockUri.file('/ws'), name: 'ws', index: 0 }];
        await registeredCommands.get(CLIENT_COMMANDS.runDoctorOnFolder)!();
        sinon.assert.calledWith(h.execute, SERVER_COMMANDS.doctor, [file('/ws')]);
        sinon.assert.calledWith(h.onDoctorResult, 'FAIL');
        sinon.assert.calledWith(h.onResult, SERVER_COMMANDS.doctor, sinon.match({ worst_verdict: 'FAIL' }));

        state.activeFile = MockUri.file('/ws/run/trainer_state.json');
        await registeredCommands.get(CLIENT_COMMANDS.compareWithBaseline)!();
        sinon.assert.calledWith(h.execute, SERVER_COMMANDS.compare, [state.activeFile.fsPath]);
        await registeredCommands.get(CLIENT_COMMANDS.setAsBaseline)!(Uri.file('/ws/good'));
        sinon.assert.calledWith(h.execute, SERVER_COMMANDS.setBaseline, [file('/ws/good')]);
        await registeredCommands.get(CLIENT_COMMANDS.restartServer)!();
        sinon.assert.calledOnce(h.restart);
        await registeredCommands.get(CLIENT_COMMANDS.showOutput)!();
        sinon.assert.calledOnce(h.output.show);
    });

    it('refuses Check environment in an untrusted workspace without calling the server', async () => {
        const h = host();
        disposables = registerCommands(h as never);
        state.isTrusted = false;
        await registeredCommands.get(CLIENT_COMMANDS.checkEnvironmentOfScript)!(Uri.file('/ws/train.py'));
        sinon.assert.notCalled(h.execute);
        state.isTrusted = true;
        await registeredCommands.get(CLIENT_COMMANDS.checkEnvironmentOfScript)!(Uri.file('/ws/train.py'));
        sinon.assert.calledWith(h.execute, SERVER_COMMANDS.checkEnvironment, [file('/ws/train.py')]);
    });
});
