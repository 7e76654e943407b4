// Run doctor / Compare in the Problems panel: the answer's findings that no server
// diagnostic shows go into the command's own collection, keyed by file, replaced by the
// next answer; a code lens's run (the executeCommand middleware) lists them too.
import * as assert from 'assert';
import * as sinon from 'sinon';
import { registerCommands } from '../../common/commands';
import { CLIENT_COMMANDS, SERVER_COMMANDS } from '../../common/constants';
import { CommandFinding, CommandFindings, findingsOf, toDiagnostic, unshownByFile } from '../../common/findings';
import { executeCommandMiddleware } from '../../common/server';
import { Uri as MockUri, registeredCommands, resetState, state } from './vscodeMock';

const file = (p: string) => MockUri.file(p).fsPath;

function finding(path: string, line: number, id: string | null, level: string, message: string, shown: boolean): CommandFinding {
    return {
        path: file(path), uri: `file://${file(path)}`, id, level, message, shown,
        range: { start: { line, character: 4 }, end: { line: line + 6, character: 5 } },
    };
}

// As trainproof_lsp/server/commands.py answers `trainproof.doctor` on /ws/runs: the log's
// findings have diagnostics on the log; the tokenizer folder's and the file not judged do not.
const DOCTOR = {
    status: 'done', worst_verdict: 'FAIL', message: 'trainproof doctor runs: FAIL — 3 report(s): 1 FAIL, 2 PASS',
    findings: [
        finding('/ws/runs/hot/trainer_state.json', 291, 'TP-DIVERGE', 'FAIL', 'loss level 91.31 at the end', true),
        finding('/ws/runs/tok', 0, 'TP-TOK-PAD-IS-EOS', 'WARN', 'pad token is the eos token (runs/tok/tokenizer_config.json)', false),
        finding('/ws/runs/odd.pt', 0, null, 'NOT-CHECKED', 'not judged: not a torch.save archive', false),
        finding('/ws/runs/tok', 0, 'TP-NOT-CHECKED', 'NOT-CHECKED', 'chat template not rendered', false),
    ],
};

describe('command findings in the Problems panel', () => {
    beforeEach(resetState);

    it('reads the findings of an answer, and none from an answer without them', () => {
        assert.strictEqual(findingsOf(DOCTOR).length, 4);
        assert.deepStrictEqual(findingsOf({ status: 'cancelled', message: 'trainproof doctor: cancelled' }), []);
        assert.deepStrictEqual(findingsOf(undefined), []);
        assert.deepStrictEqual(findingsOf({ findings: [{ path: '', message: 'x' }, null, { path: '/a' }] }), []);
    });

    it('makes a diagnostic with the rule, the level\'s severity, the range and the message', () => {
        const d = toDiagnostic(DOCTOR.findings[1]) as unknown as {
            range: { start: { line: number; character: number }; end: { line: number; character: number } };
            message: string; severity: number; source: string; code: string; data: { level: string };
        };
        assert.deepStrictEqual([d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character], [0, 4, 6, 5]);
        assert.strictEqual(d.message, 'pad token is the eos token (runs/tok/tokenizer_config.json)');
        assert.strictEqual(d.severity, 1);  // Warning
        assert.strictEqual(d.source, 'trainproof');
        assert.strictEqual(d.code, 'TP-TOK-PAD-IS-EOS');
        assert.strictEqual(d.data.level, 'WARN');
        assert.strictEqual((toDiagnostic(DOCTOR.findings[0]) as unknown as { severity: number }).severity, 0);  // Error
        const notJudged = toDiagnostic(DOCTOR.findings[2]) as unknown as { severity: number; code?: string };
        assert.strictEqual(notJudged.severity, 2);  // Information
        assert.strictEqual(notJudged.code, undefined);
    });

    it('keys the findings no diagnostic shows by file, in the answer\'s order', () => {
        const byFile = unshownByFile(DOCTOR.findings);
        assert.deepStrictEqual([...byFile.keys()], [file('/ws/runs/tok'), file('/ws/runs/odd.pt')]);
        assert.deepStrictEqual(byFile.get(file('/ws/runs/tok'))!.map((d) => d.code), ['TP-TOK-PAD-IS-EOS', 'TP-NOT-CHECKED']);
    });

    it('publishes a doctor answer into its collection, replaces it with the next, and shows the Problems panel', async () => {
        const findings = new CommandFindings();
        await findings.show(SERVER_COMMANDS.doctor, DOCTOR);
        assert.strictEqual(state.collections.length, 1);
        const [collection] = state.collections;
        assert.strictEqual(collection.name, 'trainproof doctor');
        assert.deepStrictEqual([...collection.entries.keys()], [file('/ws/runs/tok'), file('/ws/runs/odd.pt')]);
        assert.deepStrictEqual(collection.entries.get(file('/ws/runs/odd.pt'))!.map((d) => d.message),
            ['not judged: not a torch.save archive']);
        assert.deepStrictEqual(state.executed, [['workbench.actions.view.problems', []]]);

        // The next run replaces the last one's list; a cancelled run leaves it.
        await findings.show(SERVER_COMMANDS.doctor, { status: 'cancelled', message: 'trainproof doctor runs: cancelled' });
        assert.strictEqual(collection.entries.size, 2);
        await findings.show(SERVER_COMMANDS.doctor, { ...DOCTOR, findings: [DOCTOR.findings[2]] });
        assert.deepStrictEqual([...collection.entries.keys()], [file('/ws/runs/odd.pt')]);
        await findings.show(SERVER_COMMANDS.doctor, { ...DOCTOR, worst_verdict: 'PASS', findings: [] });
        assert.strictEqual(collection.entries.size, 0);
        assert.strictEqual(state.executed.length, 2);  // no findings: the panel is not pulled up

        // Compare has a collection of its own; other commands are not listed.
        await findings.show(SERVER_COMMANDS.compare, DOCTOR);
        await findings.show(SERVER_COMMANDS.setBaseline, DOCTOR);
        assert.deepStrictEqual(state.collections.map((c) => c.name), ['trainproof doctor', 'trainproof compare']);
        findings.dispose();
        assert.ok(state.collections.every((c) => c.disposed));
    });

    it('lists Run doctor from the palette through the command host', async () => {
        const findings = new CommandFindings();
        const host = {
            output: { show: sinon.spy(), appendLine: sinon.spy() },
            execute: sinon.stub().resolves(DOCTOR),
            restart: sinon.stub().resolves(),
            onDoctorResult: sinon.spy(),
            onResult: (command: string, result: unknown) => findings.show(command, result),
        };
        const disposables = registerCommands(host as never);
        try {
            state.workspaceFolders = [{ uri: MockUri.file('/ws'), name: 'ws', index: 0 }];
            await registeredCommands.get(CLIENT_COMMANDS.runDoctorOnFolder)!(MockUri.file('/ws/runs'));
            sinon.assert.calledWith(host.execute, SERVER_COMMANDS.doctor, [file('/ws/runs')]);
            assert.deepStrictEqual([...state.collections[0].entries.keys()], [file('/ws/runs/tok'), file('/ws/runs/odd.pt')]);
        } finally {
            disposables.forEach((d) => d.dispose());
            findings.dispose();
        }
    });

    it('lists a code lens\'s Run doctor too: the middleware hands the answer to the presenter', async () => {
        const findings = new CommandFindings();
        const presenters = { [SERVER_COMMANDS.doctor]: findings.presenter(SERVER_COMMANDS.doctor) };
        const next = sinon.stub().resolves(DOCTOR);
        const answer = await executeCommandMiddleware(presenters)(SERVER_COMMANDS.doctor, ['/ws/runs'], next);
        assert.strictEqual(answer, DOCTOR);
        sinon.assert.calledOnceWithExactly(next, SERVER_COMMANDS.doctor, ['/ws/runs']);
        assert.strictEqual(state.collections[0].entries.size, 2);
        findings.dispose();
    });
});
