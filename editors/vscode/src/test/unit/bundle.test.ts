import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { BUNDLE_MANIFEST, bundleMisfit, machineTarget, readBundleManifest } from '../../common/bundle';

describe('bundle: does the bundled server fit this machine', () => {
    const manifest = { target: 'darwin-arm64', pythons: ['3.10', '3.11', '3.12', '3.13', '3.14'] };

    it('names machines as vsce --target does', () => {
        assert.strictEqual(machineTarget('linux', 'x64'), 'linux-x64');
        assert.strictEqual(machineTarget('win32', 'x64'), 'win32-x64');
        assert.strictEqual(machineTarget('darwin', 'arm64'), 'darwin-arm64');
    });

    it('fits its own target and a bundled CPython', () => {
        assert.strictEqual(bundleMisfit(manifest, 'darwin-arm64', '3.12'), undefined);
        assert.strictEqual(bundleMisfit(manifest, 'darwin-arm64'), undefined);
    });

    it('says which .vsix to install on another platform', () => {
        const said = bundleMisfit(manifest, 'linux-x64', '3.12');
        assert.ok(said?.includes('built for darwin-arm64, and this machine is linux-x64'), said);
        assert.ok(said?.includes('install the trainproof .vsix for linux-x64'), said);
        assert.ok(said?.includes('trainproof.importStrategy'), said);
    });

    it('says which CPython versions it has when the interpreter is another', () => {
        const said = bundleMisfit(manifest, 'darwin-arm64', '3.9');
        assert.ok(said?.includes('CPython 3.10, 3.11, 3.12, 3.13, 3.14, not 3.9'), said);
    });

    it('reads the manifest bundle_python.py writes, and nothing else', () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tp-bundle-'));
        assert.strictEqual(readBundleManifest(dir), undefined);
        fs.writeFileSync(path.join(dir, BUNDLE_MANIFEST), JSON.stringify({ ...manifest, platform: 'macosx_12_0_arm64' }));
        assert.deepStrictEqual(readBundleManifest(dir), manifest);
        fs.writeFileSync(path.join(dir, BUNDLE_MANIFEST), '{"target": 3}');
        assert.strictEqual(readBundleManifest(dir), undefined);
    });
});
