import * as assert from 'assert';
import * as path from 'path';
import { bundledLibsPath, configurationAnswer, initializationOptions, serverLaunch } from '../../common/server';

describe('server launch', () => {
    it('runs `python -m trainproof_lsp serve` in the extension\'s folder with the bundled libraries first on PYTHONPATH', () => {
        const libs = bundledLibsPath('/ext');
        assert.strictEqual(libs, path.join('/ext', 'bundled', 'libs'));
        const launch = serverLaunch(['/usr/bin/python3'], 'useBundled', libs, '/ext', { PATH: '/bin', PYTHONPATH: '/mine' });
        assert.strictEqual(launch.command, '/usr/bin/python3');
        assert.deepStrictEqual(launch.args, ['-m', 'trainproof_lsp', 'serve']);
        assert.strictEqual(launch.env.PYTHONPATH, `${libs}${path.delimiter}/mine`);
        assert.strictEqual(launch.env.PYTHONNOUSERSITE, '1');
        assert.strictEqual(launch.env.PATH, '/bin');
        assert.strictEqual(launch.cwd, '/ext');
        assert.ok(launch.bundled);
    });

    it('keeps no PYTHONPATH entry that would name the working folder (empty or relative)', () => {
        const d = path.delimiter;
        const launch = serverLaunch(['python3'], 'useBundled', '/ext/bundled/libs', '/ext',
            { PYTHONPATH: `${d}.${d}src${d}/opt/lib${d}`, PYTHONSTARTUP: '/ws/evil.py' });
        assert.strictEqual(launch.env.PYTHONPATH, `/ext/bundled/libs${d}/opt/lib`);
        assert.strictEqual(launch.env.PYTHONSTARTUP, undefined);
        assert.strictEqual(serverLaunch(['python3'], 'fromEnvironment', undefined, '/ext', { PYTHONPATH: `${d}x` }).env.PYTHONPATH,
            undefined);
    });

    it('leaves PYTHONPATH alone with importStrategy fromEnvironment, or without a bundle', () => {
        for (const launch of [serverLaunch(['python3'], 'fromEnvironment', '/ext/bundled/libs', '/ws', { PATH: '/bin' }),
            serverLaunch(['python3'], 'useBundled', undefined, '/ws', { PATH: '/bin' })]) {
            assert.strictEqual(launch.env.PYTHONPATH, undefined);
            assert.ok(!launch.bundled);
        }
    });

    it('keeps the interpreter\'s own arguments before -m', () => {
        const launch = serverLaunch(['conda', 'run', '-n', 'train', 'python'], 'fromEnvironment', undefined, '/ws', {});
        assert.strictEqual(launch.command, 'conda');
        assert.deepStrictEqual(launch.args, ['run', '-n', 'train', 'python', '-m', 'trainproof_lsp', 'serve']);
    });

    it('answers workspace/configuration for trainproof with the server\'s settings only', () => {
        const params = { items: [{ section: 'editor' }, { section: 'trainproof', scopeUri: 'file:///ws' }] };
        const fromVscode = [{ tabSize: 4 }, { interpreter: ['x'], debounceMs: 5 }];
        const seen: (string | undefined)[] = [];
        const answer = configurationAnswer(params, fromVscode, (scope) => { seen.push(scope); return { debounceMs: 5 }; });
        assert.deepStrictEqual(answer, [{ tabSize: 4 }, { debounceMs: 5 }]);
        assert.deepStrictEqual(seen, ['file:///ws']);
    });

    it('tells the server in initializationOptions that Show run\'s page is shown in a panel, beside the settings', () => {
        const presenter = async (args: unknown[], send: (args: unknown[]) => Promise<unknown>) => send(args);
        const settings = { debounceMs: 5, baseline: null };
        assert.deepStrictEqual(initializationOptions(settings, { 'trainproof.showRun': presenter }),
            { debounceMs: 5, baseline: null, clientFeatures: { showRunPanel: true } });
        // Without its presenter the server should open the page in a browser instead.
        assert.deepStrictEqual(initializationOptions(settings, {}),
            { debounceMs: 5, baseline: null, clientFeatures: { showRunPanel: false } });
        assert.deepStrictEqual(settings, { debounceMs: 5, baseline: null });
    });
});
