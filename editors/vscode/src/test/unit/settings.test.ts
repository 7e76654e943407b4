import * as assert from 'assert';
import * as path from 'path';
import { CLIENT_ONLY_SETTINGS } from '../../common/constants';
import {
    affectsServerSettings, getClientSettings, getServerSettings, needsRestart, serverSettingNames, withWorkspacePython,
} from '../../common/settings';
import { resetState, state } from './vscodeMock';

// eslint-disable-next-line @typescript-eslint/no-var-requires
const packageJSON = require(path.join(__dirname, '..', '..', '..', 'package.json'));

function change(...keys: string[]) {
    return { affectsConfiguration: (key: string) => keys.includes(key) };
}

describe('settings', () => {
    beforeEach(resetState);

    it('sends the server every contributed setting except the client\'s own', () => {
        const names = serverSettingNames(packageJSON);
        assert.ok(names.includes('maxDiagnosticsPerFile'));
        assert.ok(names.includes('checkEnvironment'));
        for (const own of CLIENT_ONLY_SETTINGS) {
            assert.ok(!names.includes(own), own);
        }
    });

    it('reads the server settings with nulls for unset optional values', () => {
        state.configuration = { 'trainproof.debounceMs': 50, 'trainproof.checkEnvironment': true };
        const settings = getServerSettings(['debounceMs', 'checkEnvironment', 'baseline'], undefined, true);
        assert.deepStrictEqual(settings, { debounceMs: 50, checkEnvironment: true, baseline: null });
    });

    it('turns environment checks off and drops the run interpreter in an untrusted workspace', () => {
        state.configuration = { 'trainproof.checkEnvironment': true, 'trainproof.python': '/ws/.venv/bin/python', 'trainproof.debounceMs': 10 };
        const settings = getServerSettings(['debounceMs', 'checkEnvironment', 'python'], undefined, false);
        assert.deepStrictEqual(settings, { debounceMs: 10, checkEnvironment: false, python: null });
    });

    it('gives Check environment the Python extension\'s interpreter unless trainproof.python names one', () => {
        const settings = { debounceMs: 10, python: null };
        assert.deepStrictEqual(withWorkspacePython(settings, ['/ws/.venv/bin/python'], true),
            { debounceMs: 10, python: '/ws/.venv/bin/python' });
        assert.deepStrictEqual(withWorkspacePython({ python: '/opt/py' }, ['/ws/.venv/bin/python'], true), { python: '/opt/py' });
        // Untrusted: nothing of the workspace's; a command with arguments is no interpreter path.
        assert.deepStrictEqual(withWorkspacePython(settings, ['/ws/.venv/bin/python'], false), settings);
        assert.deepStrictEqual(withWorkspacePython(settings, ['conda', 'run', 'python'], true), settings);
        assert.deepStrictEqual(withWorkspacePython(settings, undefined, true), settings);
    });

    it('uses the bundled server in an untrusted workspace whatever importStrategy says', () => {
        state.configuration = { 'trainproof.importStrategy': 'fromEnvironment', 'trainproof.interpreter': ['/usr/bin/python3', ''] };
        assert.deepStrictEqual(getClientSettings(undefined, true), { interpreter: ['/usr/bin/python3'], importStrategy: 'fromEnvironment' });
        assert.strictEqual(getClientSettings(undefined, false).importStrategy, 'useBundled');
    });

    it('restarts the server for interpreter changes and forwards server setting changes live', () => {
        assert.ok(needsRestart(change('trainproof.interpreter') as never));
        assert.ok(needsRestart(change('trainproof.importStrategy') as never));
        assert.ok(!needsRestart(change('trainproof.debounceMs') as never));
        assert.ok(affectsServerSettings(change('trainproof.debounceMs') as never, ['debounceMs']));
        assert.ok(!affectsServerSettings(change('editor.fontSize') as never, ['debounceMs']));
    });
});
