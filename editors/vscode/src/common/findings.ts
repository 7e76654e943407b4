// Run doctor / Compare in the Problems panel. The server answers both commands with their
// findings (`findings`, trainproof_lsp/server/commands.py) and publishes a diagnostic for
// each finding on a file (`shown: true`), which the Problems panel lists already. The rest
// (a folder's findings, a file the command could not judge) has no diagnostic: it goes
// into a collection of this client's, one per command, replaced by the command's next
// answer, so every finding of the last run is in the Problems panel once.
import { Diagnostic, DiagnosticCollection, DiagnosticSeverity, Disposable, Position, Range, Uri, commands, languages } from 'vscode';
import { SERVER_COMMANDS, SERVER_NAME } from './constants';

/** One entry of a command's `findings` (paths absolute; range 0-based, in the client's units). */
export interface CommandFinding {
    path: string;
    uri?: string | null;
    range?: { start: { line: number; character: number }; end: { line: number; character: number } } | null;
    id: string | null;
    level: string;
    message: string;
    shown: boolean;
}

const SEVERITY: Record<string, DiagnosticSeverity> = {
    FAIL: DiagnosticSeverity.Error,
    WARN: DiagnosticSeverity.Warning,
    'NOT-CHECKED': DiagnosticSeverity.Information,
    INFO: DiagnosticSeverity.Information,
};

/** The findings of an answer, or [] for an answer without them (cancelled, refused...). */
export function findingsOf(result: unknown): CommandFinding[] {
    const list = (result as { findings?: unknown } | undefined)?.findings;
    return Array.isArray(list) ? list.filter((f): f is CommandFinding =>
        !!f && typeof f === 'object' && typeof (f as CommandFinding).path === 'string' && !!(f as CommandFinding).path
        && typeof (f as CommandFinding).message === 'string') : [];
}

export function toDiagnostic(f: CommandFinding): Diagnostic {
    const r = f.range;
    const range = r ? new Range(new Position(r.start.line, r.start.character), new Position(r.end.line, r.end.character))
        : new Range(new Position(0, 0), new Position(0, 0));
    const d = new Diagnostic(range, f.message, SEVERITY[f.level] ?? DiagnosticSeverity.Information);
    d.source = SERVER_NAME;
    if (f.id) {
        d.code = f.id;
    }
    // The status bar reads a trainproof problem's level here, as from the server's own.
    (d as Diagnostic & { data?: unknown }).data = { id: f.id, level: f.level };
    return d;
}

/** The findings no diagnostic shows, as diagnostics by file (or folder), in the answer's order. */
export function unshownByFile(findings: readonly CommandFinding[]): Map<string, Diagnostic[]> {
    const out = new Map<string, Diagnostic[]>();
    for (const f of findings) {
        if (f.shown) {
            continue;
        }
        const list = out.get(f.path) ?? [];
        list.push(toDiagnostic(f));
        out.set(f.path, list);
    }
    return out;
}

/** The commands whose answers are listed here: doctor (and a dataset check, which is
 *  doctor on one file) and compare. */
export const LISTED_COMMANDS: readonly string[] = [SERVER_COMMANDS.doctor, SERVER_COMMANDS.compare];

export class CommandFindings implements Disposable {
    private readonly collections = new Map<string, DiagnosticCollection>();

    /** Lists a command's answer: its findings without a diagnostic replace the command's
     *  last ones, and the Problems panel is shown when the answer has findings. */
    async show(command: string, result: unknown): Promise<void> {
        if (!LISTED_COMMANDS.includes(command) || (result as { status?: unknown } | undefined)?.status !== 'done') {
            return;
        }
        let collection = this.collections.get(command);
        if (!collection) {
            collection = languages.createDiagnosticCollection(`${SERVER_NAME} ${command.split('.').pop()}`);
            this.collections.set(command, collection);
        }
        collection.clear();
        const findings = findingsOf(result);
        for (const [file, diagnostics] of unshownByFile(findings)) {
            collection.set(Uri.file(file), diagnostics);
        }
        if (findings.length > 0) {
            await commands.executeCommand('workbench.actions.view.problems');
        }
    }

    /** The executeCommand middleware's presenter (server.ts) for a listed command, so a
     *  code lens's run is listed as the palette's is: runs it, lists the answer, returns it. */
    presenter(command: string): (args: unknown[], send: (args: unknown[]) => Promise<unknown>) => Promise<unknown> {
        return async (args, send) => {
            const result = await send(args);
            await this.show(command, result);
            return result;
        };
    }

    dispose(): void {
        for (const c of this.collections.values()) {
            c.dispose();
        }
        this.collections.clear();
    }
}
