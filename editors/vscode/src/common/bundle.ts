// What the bundled server was built for, and whether it fits this machine. Each .vsix
// carries one target platform's compiled modules (scripts/bundle_python.py writes
// bundled/libs/trainproof-bundle.json); a .vsix for another platform would fail deep in
// an ImportError, so the extension says so plainly before it starts the server.
import * as fs from 'fs';
import * as path from 'path';

export const BUNDLE_MANIFEST = 'trainproof-bundle.json';

export interface BundleManifest {
    /** The VS Code target platform, as `vsce package --target` names it: linux-x64, darwin-arm64... */
    target: string;
    /** CPython versions the compiled modules are bundled for ("3.10"...). */
    pythons: string[];
}

/** The manifest beside the bundled libraries, or undefined when there is none (a
 *  development build) or it cannot be read. */
export function readBundleManifest(libs: string): BundleManifest | undefined {
    try {
        const raw = JSON.parse(fs.readFileSync(path.join(libs, BUNDLE_MANIFEST), 'utf8')) as Partial<BundleManifest>;
        if (typeof raw.target !== 'string' || !Array.isArray(raw.pythons)) {
            return undefined;
        }
        return { target: raw.target, pythons: raw.pythons.filter((v): v is string => typeof v === 'string') };
    } catch {
        return undefined;
    }
}

/** This machine as a VS Code target platform name (process.platform-process.arch). */
export function machineTarget(platform: string = process.platform, arch: string = process.arch): string {
    return `${platform}-${arch}`;
}

/** Why the bundled server cannot run here, as a message for the user, or undefined
 *  when it fits. `pythonVersion` ("3.12"), when known, is checked too. */
export function bundleMisfit(manifest: BundleManifest, here: string = machineTarget(),
    pythonVersion?: string): string | undefined {
    const fallback = 'or install trainproof-lsp in your Python environment (its README, "Install") ' +
        'and set trainproof.importStrategy to "fromEnvironment".';
    if (manifest.target !== here) {
        return `the bundled language server is built for ${manifest.target}, and this machine is ${here}: ` +
            `install the trainproof .vsix for ${here}, ${fallback}`;
    }
    if (pythonVersion !== undefined && !manifest.pythons.includes(pythonVersion)) {
        return `the bundled language server has compiled modules for CPython ${manifest.pythons.join(', ')}, ` +
            `not ${pythonVersion}: choose one of those (trainproof.interpreter), ${fallback}`;
    }
    return undefined;
}

/** The message for a bundled server in `libs` that does not fit this machine, or
 *  undefined (it fits, or carries no manifest). */
export function bundledServerProblem(libs: string): string | undefined {
    const manifest = readBundleManifest(libs);
    return manifest ? bundleMisfit(manifest) : undefined;
}
