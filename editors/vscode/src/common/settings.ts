// Settings: which `trainproof.*` keys go to the server, and the client's own.
//
// The server's settings are declared once, in the server (trainproof_lsp/server/settings.py);
// package.json's `contributes.configuration` mirrors them (a drift test compares the two)
// and this module forwards every contributed key that is not the client's own, so a new
// server setting needs only its package.json entry.
import { ConfigurationChangeEvent, ConfigurationScope, WorkspaceConfiguration, WorkspaceFolder, workspace } from 'vscode';
import { CLIENT_ONLY_SETTINGS, SECTION } from './constants';

import { ImportStrategy } from './launch';

export { ImportStrategy } from './launch';

export interface ClientSettings {
    /** The Python (and arguments) that runs the server; empty: resolve it (python.ts). */
    interpreter: string[];
    importStrategy: ImportStrategy;
}

/** Settings that import or run code from the workspace: off or ignored until it is trusted. */
export const UNTRUSTED_OVERRIDES: Readonly<Record<string, unknown>> = {
    checkEnvironment: false,
    python: null,
};

/** Every setting that names a path, an executable or a command, or runs code: in an
 *  untrusted workspace VS Code takes them from the user's settings only
 *  (package.json capabilities.untrustedWorkspaces.restrictedConfigurations). */
export const RESTRICTED_SETTINGS: readonly string[] = [
    'interpreter', 'importStrategy', 'checkEnvironment', 'python', 'baseline', 'configFile', 'entrypoints',
    'rulesDocsUrl',
    // Column names passed to the server's children as --column=SERIES=NAME: text, so a
    // workspace does not choose it in Restricted Mode either.
    'columns',
    // Dataset field names (text), and the token map's tokenizer folder and training config
    // (paths the server reads) and loss mode: the user's settings only in Restricted Mode.
    'fields', 'tokenizer', 'trainConfig', 'loss',
];

/** The server's settings with the workspace's interpreter for Check environment: the
 *  `python` setting when set, else the Python extension's selection (one executable; a
 *  command with arguments cannot be passed as one). The server checks it exists. */
export function withWorkspacePython(settings: Record<string, unknown>, selected: string[] | undefined,
    trusted: boolean): Record<string, unknown> {
    if (!trusted || !('python' in settings) || settings.python || !selected || selected.length !== 1) {
        return settings;
    }
    return { ...settings, python: selected[0] };
}

/** The server's setting names (without `trainproof.`), from the extension's package.json. */
export function serverSettingNames(packageJSON: { contributes?: { configuration?: { properties?: Record<string, unknown> } } }): string[] {
    const properties = packageJSON.contributes?.configuration?.properties ?? {};
    return Object.keys(properties)
        .filter((key) => key.startsWith(`${SECTION}.`))
        .map((key) => key.slice(SECTION.length + 1))
        .filter((name) => !CLIENT_ONLY_SETTINGS.includes(name));
}

/** What the server gets as initializationOptions and as the answer to
 *  workspace/configuration: only its own keys (it warns about unknown ones), with the
 *  workspace-trust overrides applied. */
export function getServerSettings(names: readonly string[], scope: ConfigurationScope | undefined,
    trusted: boolean): Record<string, unknown> {
    const config = workspace.getConfiguration(SECTION, scope);
    const settings: Record<string, unknown> = {};
    for (const name of names) {
        settings[name] = config.get(name, null);
    }
    return trusted ? settings : { ...settings, ...UNTRUSTED_OVERRIDES };
}

export function getClientSettings(scope: ConfigurationScope | undefined, trusted: boolean): ClientSettings {
    const config: WorkspaceConfiguration = workspace.getConfiguration(SECTION, scope);
    const interpreter = config.get<string[]>('interpreter', []);
    const strategy = config.get<string>('importStrategy', 'useBundled');
    return {
        interpreter: Array.isArray(interpreter) ? interpreter.filter((s) => typeof s === 'string' && s.length > 0) : [],
        // Untrusted: the bundled copy only, never a package from the workspace's environment.
        importStrategy: trusted && strategy === 'fromEnvironment' ? 'fromEnvironment' : 'useBundled',
    };
}

/** A change that needs a new server process (a different Python or server copy).
 *  (`trace.server` is read live by vscode-languageclient.) */
export function needsRestart(e: ConfigurationChangeEvent): boolean {
    return ['interpreter', 'importStrategy'].some((name) => e.affectsConfiguration(`${SECTION}.${name}`));
}

/** A change the running server takes live (it re-reads workspace/configuration). */
export function affectsServerSettings(e: ConfigurationChangeEvent, names: readonly string[]): boolean {
    return names.some((name) => e.affectsConfiguration(`${SECTION}.${name}`));
}

/** The scope the one server reads its settings in: the first workspace folder. */
export function defaultScope(): WorkspaceFolder | undefined {
    return workspace.workspaceFolders?.[0];
}
