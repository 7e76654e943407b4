// How the language server process is started: which command, arguments, working folder
// and environment. No `vscode` import: tests/test_lsp_launch.py bundles this module and
// starts the server exactly as the extension would, in a hostile workspace.
//
// `python -m trainproof_lsp` puts its working folder first on sys.path, so the server never
// runs in the workspace (a cloned repository holding `json.py`, `pygls/` or
// `trainproof_lsp/` would run its code on open): it runs in a folder of the extension's own.
// PYTHONPATH keeps only absolute entries (an empty one means "the working folder").
// Not `-I`/`-E`: the bundled copy is found through PYTHONPATH (the server's own children,
// doctor and compare, need it too). docs/security.md.
import * as path from 'path';

/** Where `make vsix` puts the server and its Python dependencies, under the extension root. */
export const BUNDLED_LIBS_DIR = ['bundled', 'libs'] as const;

export type ImportStrategy = 'useBundled' | 'fromEnvironment';

export interface ServerLaunch {
    command: string;
    args: string[];
    cwd: string;
    env: NodeJS.ProcessEnv;
    /** True when the bundled copy runs (PYTHONPATH points into the extension). */
    bundled: boolean;
}

export function bundledLibsPath(extensionRoot: string): string {
    return path.join(extensionRoot, ...BUNDLED_LIBS_DIR);
}

/** PYTHONPATH entries that cannot name the working folder: absolute ones only. */
export function absolutePathEntries(value: string | undefined, delimiter: string = path.delimiter): string[] {
    return (value ?? '').split(delimiter).filter((p) => p.length > 0 && path.isAbsolute(p));
}

/** `python -m trainproof_lsp serve` in `serverFolder` (the extension's own folder, never the
 *  workspace), with the bundled libraries first on PYTHONPATH when they are used. */
export function serverLaunch(interpreter: string[], strategy: ImportStrategy, bundledLibs: string | undefined,
    serverFolder: string, baseEnv: NodeJS.ProcessEnv = process.env): ServerLaunch {
    const env: NodeJS.ProcessEnv = { ...baseEnv, PYTHONUTF8: '1' };
    delete env.PYTHONPATH;
    delete env.PYTHONSTARTUP;
    const bundled = strategy === 'useBundled' && bundledLibs !== undefined;
    const pythonPath = [...(bundled ? [bundledLibs] : []), ...absolutePathEntries(baseEnv.PYTHONPATH)];
    if (pythonPath.length > 0) {
        env.PYTHONPATH = pythonPath.join(path.delimiter);
    }
    if (bundled) {
        // The user's site-packages could shadow a bundled dependency with another version.
        env.PYTHONNOUSERSITE = '1';
    }
    return {
        command: interpreter[0],
        args: [...interpreter.slice(1), '-m', 'trainproof_lsp', 'serve'],
        cwd: serverFolder,
        env,
        bundled,
    };
}
