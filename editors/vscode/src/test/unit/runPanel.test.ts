import * as assert from 'assert';
import * as sinon from 'sinon';
import { SERVER_COMMANDS } from '../../common/constants';
import { RUN_VIEW_TYPE, RunPanels, showRunTarget } from '../../common/runPanel';
import { executeCommandMiddleware } from '../../common/server';
import { Uri as MockUri, resetState, state, vscode } from './vscodeMock';

const Uri = { file: (p: string) => MockUri.file(p) as never, parse: (s: string) => MockUri.parse(s) as never };
const file = (p: string) => MockUri.file(p).fsPath;
const PAGE = '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src \'none\'"></head>'
    + '<body><svg class="chart"></svg>TP-DIVERGE</body></html>';

function page(title: string, html = PAGE) {
    return { status: 'done', title, html };
}

describe('Show run: the run report beside the log', () => {
    let panels: RunPanels;
    let sandbox: sinon.SinonSandbox;
    beforeEach(() => {
        resetState();
        panels = new RunPanels();
        sandbox = sinon.createSandbox();
    });
    afterEach(() => {
        panels.dispose();
        sandbox.restore();
    });

    it('shows the lens\'s log (a path or a file: URI), else the active editor\'s file', () => {
        const log = file('/ws/run/trainer_state.json');
        assert.strictEqual(showRunTarget([log], Uri.file('/ws/other.json')), log);
        assert.strictEqual(showRunTarget([`file://${log}`], undefined), log);
        assert.strictEqual(showRunTarget([Uri.file(log)], undefined), log);
        assert.strictEqual(showRunTarget([], Uri.file(log)), log);
        assert.strictEqual(showRunTarget([], Uri.parse('untitled://Untitled-1')), undefined);
        assert.strictEqual(showRunTarget([''], undefined), undefined);
        // With the run panel in front there is no active text editor: the panel's log.
        assert.strictEqual(showRunTarget([], undefined, log), log);
        assert.strictEqual(showRunTarget([], Uri.file('/ws/b.json'), log), file('/ws/b.json'));
    });

    it('asks the server for the log\'s page and shows it beside, scripts off, titled after the log', async () => {
        const log = file('/ws/lr_hot_diverges/trainer_state.json');
        const send = sinon.stub().resolves(page('Run: lr_hot_diverges/trainer_state.json'));
        await panels.show([log], send);
        sinon.assert.calledOnceWithExactly(send, [log]);
        assert.strictEqual(state.panels.length, 1);
        const [panel] = state.panels;
        assert.strictEqual(panel.viewType, RUN_VIEW_TYPE);
        assert.strictEqual(panel.title, 'Run: lr_hot_diverges/trainer_state.json');
        assert.deepStrictEqual(panel.showOptions, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true });
        assert.deepStrictEqual(panel.options, { enableScripts: false, enableFindWidget: true, localResourceRoots: [] });
        // The server's page as it is: its Content-Security-Policy stays.
        assert.strictEqual(panel.webview.html, PAGE);
    });

    it('palette: shows the active editor\'s log', async () => {
        state.activeFile = MockUri.file('/ws/run/metrics.jsonl');
        const send = sinon.stub().resolves(page('Run: run/metrics.jsonl'));
        await panels.show([], send);
        sinon.assert.calledOnceWithExactly(send, [state.activeFile.fsPath]);
        assert.strictEqual(state.panels.length, 1);
    });

    it('reuses one panel per log: asked again, it is revealed with the new page', async () => {
        const log = file('/ws/a/trainer_state.json');
        const send = sinon.stub();
        send.onFirstCall().resolves(page('Run: a/trainer_state.json', '<p>first</p>'));
        send.onSecondCall().resolves(page('Run: a/trainer_state.json', '<p>second</p>'));
        await panels.show([log], send);
        await panels.show([`file://${log}`], send);
        assert.strictEqual(state.panels.length, 1);
        const [panel] = state.panels;
        assert.strictEqual(panel.webview.html, '<p>second</p>');
        assert.deepStrictEqual(panel.revealed, [[undefined, true]]);

        send.resolves(page('Run: b/trainer_state.json'));
        await panels.show([file('/ws/b/trainer_state.json')], send);
        assert.strictEqual(state.panels.length, 2, 'another log, another panel');
    });

    it('palette with the run panel in front: refreshes that panel', async () => {
        const log = file('/ws/a/trainer_state.json');
        const send = sinon.stub().resolves(page('Run: a/trainer_state.json'));
        await panels.show([log], send);
        state.panels[0].active = true;
        await panels.show([], send);
        sinon.assert.calledTwice(send);
        sinon.assert.alwaysCalledWithExactly(send, [log]);
        assert.strictEqual(state.panels.length, 1);
    });

    it('opens a new panel once the user closed the old one', async () => {
        const log = file('/ws/a/trainer_state.json');
        const send = sinon.stub().resolves(page('Run: a/trainer_state.json'));
        await panels.show([log], send);
        state.panels[0].dispose();
        await panels.show([log], send);
        assert.strictEqual(state.panels.length, 2);
        assert.ok(!state.panels[1].disposed);
        assert.deepStrictEqual(state.panels[1].revealed, []);
    });

    it('opens no panel when the server has nothing to show, and leaves the message to the server', async () => {
        const warn: sinon.SinonSpy = sandbox.spy(vscode.window, 'showWarningMessage');
        const error: sinon.SinonSpy = sandbox.spy(vscode.window, 'showErrorMessage');
        const none = { status: 'none', message: 'trainproof show run x/trainer_state.json: nothing to show — invalid JSON' };
        const result = await panels.show([file('/ws/x/trainer_state.json')], sinon.stub().resolves(none));
        assert.deepStrictEqual(result, none);
        await panels.show([file('/ws/x/trainer_state.json')], sinon.stub().resolves({ status: 'cancelled' }));
        assert.strictEqual(state.panels.length, 0);
        sinon.assert.notCalled(warn);
        sinon.assert.notCalled(error);
    });

    it('shows an error when the request fails or the answer has no page', async () => {
        const error: sinon.SinonSpy = sandbox.spy(vscode.window, 'showErrorMessage');
        await panels.show([file('/ws/x.json')], sinon.stub().rejects(new Error('Request workspace/executeCommand failed')));
        sinon.assert.calledWithMatch(error, /Show run failed: Request workspace\/executeCommand failed/);
        await panels.show([file('/ws/x.json')], sinon.stub().resolves(undefined));
        sinon.assert.calledWithMatch(error, /no page for .*x\.json \(no answer\)/);
        await panels.show([file('/ws/x.json')], sinon.stub().resolves({ status: 'done' }));
        sinon.assert.calledWithMatch(error, /no page for .*x\.json \(done\)/);
        assert.strictEqual(state.panels.length, 0);
    });

    it('asks the user to open a log when there is none, without calling the server', async () => {
        const warn: sinon.SinonSpy = sandbox.spy(vscode.window, 'showWarningMessage');
        const send = sinon.stub();
        await panels.show([], send);
        sinon.assert.notCalled(send);
        sinon.assert.calledWithMatch(warn, /open a training log first/);
    });

    it('closes its panels when the extension is deactivated', async () => {
        await panels.show([file('/ws/a.json')], sinon.stub().resolves(page('Run: ws/a.json')));
        panels.dispose();
        assert.ok(state.panels[0].disposed);
    });
});

describe('executeCommand middleware', () => {
    it('routes a presented command (lens or palette) through its presenter, the rest to the server', async () => {
        const next = sinon.stub().callsFake(async (command: string, args: unknown[]) => ({ command, args }));
        const presenter = sinon.stub().callsFake(async (args: unknown[], send: (a: unknown[]) => Promise<unknown>) =>
            send(['/ws/log.json', ...args]));
        const middleware = executeCommandMiddleware({ [SERVER_COMMANDS.showRun]: presenter });

        assert.deepStrictEqual(await middleware(SERVER_COMMANDS.showRun, [], next),
            { command: SERVER_COMMANDS.showRun, args: ['/ws/log.json'] });
        sinon.assert.calledOnce(presenter);
        assert.deepStrictEqual(await middleware(SERVER_COMMANDS.doctor, ['/ws'], next),
            { command: SERVER_COMMANDS.doctor, args: ['/ws'] });
        sinon.assert.calledOnce(presenter);
    });
});
