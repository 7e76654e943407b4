import * as assert from 'assert';
import * as sinon from 'sinon';
import { PYTHON_EXTENSION_ID, checkPythonVersion, defaultPython, resolveInterpreter } from '../../common/python';
import { Uri, resetState, state } from './vscodeMock';

function pythonExtension(executable: string | undefined) {
    const environments = {
        getActiveEnvironmentPath: sinon.stub().returns({ id: 'env', path: '/env' }),
        resolveEnvironment: sinon.stub().resolves(executable ? { executable: { uri: Uri.file(executable) } } : undefined),
        onDidChangeActiveEnvironmentPath: sinon.stub(),
    };
    return { extension: { isActive: false, activate: sinon.stub().resolves({ environments }) }, environments };
}

describe('python: which interpreter runs the server', () => {
    beforeEach(resetState);

    it('takes trainproof.interpreter first', async () => {
        const { extension } = pythonExtension('/env/bin/python');
        state.extensions[PYTHON_EXTENSION_ID] = extension;
        const got = await resolveInterpreter(['/opt/py/bin/python', '-X', 'utf8'], undefined, true);
        assert.deepStrictEqual(got, { command: ['/opt/py/bin/python', '-X', 'utf8'], source: 'setting' });
        sinon.assert.notCalled(extension.activate);
    });

    it('then the Python extension\'s active environment', async () => {
        const { extension, environments } = pythonExtension('/env/bin/python');
        state.extensions[PYTHON_EXTENSION_ID] = extension;
        const got = await resolveInterpreter([], undefined, true);
        assert.deepStrictEqual(got, { command: [Uri.file('/env/bin/python').fsPath], source: 'python-extension' });
        sinon.assert.calledOnce(environments.resolveEnvironment);
    });

    it('falls back to python3 without the Python extension', async () => {
        assert.deepStrictEqual(await resolveInterpreter([], undefined, true), { command: ['python3'], source: 'default' });
        assert.deepStrictEqual(defaultPython('win32'), ['python']);
    });

    it('falls back to python3 when the extension has no active environment', async () => {
        state.extensions[PYTHON_EXTENSION_ID] = pythonExtension(undefined).extension;
        assert.deepStrictEqual(await resolveInterpreter([], undefined, true), { command: ['python3'], source: 'default' });
    });

    it('does not ask the Python extension in an untrusted workspace (its environment may be the workspace\'s)', async () => {
        const { extension } = pythonExtension('/ws/.venv/bin/python');
        state.extensions[PYTHON_EXTENSION_ID] = extension;
        assert.deepStrictEqual(await resolveInterpreter([], undefined, false), { command: ['python3'], source: 'default' });
        sinon.assert.notCalled(extension.activate);
    });

    it('accepts Python 3.10+ and says why it refuses older or broken ones', async () => {
        assert.strictEqual(await checkPythonVersion(['python3'], async () => '3.11\n'), undefined);
        assert.strictEqual(await checkPythonVersion(['python3'], async () => '3.10\n'), undefined);
        assert.match(String(await checkPythonVersion(['python3'], async () => '3.9\n')), /Python 3\.9; trainproof-lsp needs 3\.10/);
        assert.match(String(await checkPythonVersion(['nope'], async () => { throw new Error('ENOENT'); })), /cannot run nope \(ENOENT\)/);
    });

    it('passes the interpreter\'s own arguments before -c', async () => {
        const run = sinon.stub().resolves('3.12');
        await checkPythonVersion(['conda', 'run', 'python'], run);
        sinon.assert.calledWith(run, 'conda', sinon.match((args: string[]) => args[0] === 'run' && args[1] === 'python' && args[2] === '-c'));
    });
});
