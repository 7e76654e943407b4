// Which Python runs the server: `trainproof.interpreter`, else the Python extension's
// active environment (ms-python.python, when installed), else python3.
import { execFile } from 'child_process';
import { Disposable, Event, Uri, WorkspaceFolder, extensions } from 'vscode';
import { MIN_PYTHON } from './constants';
import { traceError, traceLog, traceVerbose } from './logging';

/** The part of ms-python.python's API used here (its `environments` API, 2023+). */
interface PythonEnvironmentsApi {
    getActiveEnvironmentPath(resource?: Uri | WorkspaceFolder): { id: string; path: string };
    resolveEnvironment(env: { id: string; path: string } | string): Promise<{ executable: { uri?: Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: Event<unknown>;
}
interface PythonExtensionApi {
    environments?: PythonEnvironmentsApi;
}

export const PYTHON_EXTENSION_ID = 'ms-python.python';

export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface Interpreter {
    command: string[];
    source: InterpreterSource;
}

export function defaultPython(platform: NodeJS.Platform = process.platform): string[] {
    return [platform === 'win32' ? 'python' : 'python3'];
}

async function pythonEnvironments(): Promise<PythonEnvironmentsApi | undefined> {
    const extension = extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
    if (!extension) {
        return undefined;
    }
    try {
        const api = extension.isActive ? extension.exports : await extension.activate();
        return api?.environments;
    } catch (e) {
        traceError(`the Python extension did not activate: ${e}`);
        return undefined;
    }
}

/** The active environment's interpreter, or undefined without the Python extension. */
export async function interpreterFromPythonExtension(resource?: WorkspaceFolder): Promise<string[] | undefined> {
    const environments = await pythonEnvironments();
    if (!environments) {
        return undefined;
    }
    try {
        const env = await environments.resolveEnvironment(environments.getActiveEnvironmentPath(resource));
        const executable = env?.executable.uri?.fsPath;
        return executable ? [executable] : undefined;
    } catch (e) {
        traceError(`could not resolve the Python extension's active environment: ${e}`);
        return undefined;
    }
}

/** Resolution order: the setting, the Python extension (trusted workspaces only: its
 *  active environment may be a folder of the workspace), python3. */
export async function resolveInterpreter(setting: string[], resource: WorkspaceFolder | undefined,
    trusted: boolean): Promise<Interpreter> {
    if (setting.length > 0) {
        return { command: setting, source: 'setting' };
    }
    if (trusted) {
        const fromExtension = await interpreterFromPythonExtension(resource);
        if (fromExtension) {
            return { command: fromExtension, source: 'python-extension' };
        }
    }
    return { command: defaultPython(), source: 'default' };
}

/** Fires when the Python extension's active environment changes (nothing without it). */
export async function onDidChangePythonInterpreter(listener: () => unknown): Promise<Disposable | undefined> {
    const environments = await pythonEnvironments();
    return environments?.onDidChangeActiveEnvironmentPath(() => listener());
}

export type RunFile = (file: string, args: string[]) => Promise<string>;

const runFile: RunFile = (file, args) => new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 15000 }, (error, stdout, stderr) => {
        if (error) {
            reject(new Error(`${error.message}${stderr ? `: ${stderr.trim()}` : ''}`));
        } else {
            resolve(stdout);
        }
    });
});

/** "3.11" -> undefined when new enough, else a sentence for the user. */
export async function checkPythonVersion(interpreter: string[], run: RunFile = runFile): Promise<string | undefined> {
    let out: string;
    try {
        out = await run(interpreter[0], [...interpreter.slice(1), '-c', 'import sys; print("%d.%d" % sys.version_info[:2])']);
    } catch (e) {
        return `cannot run ${interpreter.join(' ')} (${e instanceof Error ? e.message : e}); set trainproof.interpreter to a Python ${MIN_PYTHON.join('.')}+`;
    }
    const match = /(\d+)\.(\d+)/.exec(out);
    if (!match) {
        return `${interpreter.join(' ')} did not report its version (${out.trim()})`;
    }
    const [major, minor] = [Number(match[1]), Number(match[2])];
    traceVerbose(`${interpreter.join(' ')} is Python ${major}.${minor}`);
    if (major < MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor < MIN_PYTHON[1])) {
        return `${interpreter.join(' ')} is Python ${major}.${minor}; trainproof-lsp needs ${MIN_PYTHON.join('.')} or newer (set trainproof.interpreter)`;
    }
    traceLog(`Python ${major}.${minor}: ${interpreter.join(' ')}`);
    return undefined;
}
