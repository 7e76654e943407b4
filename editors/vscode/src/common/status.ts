// The status-bar item: the workspace's worst verdict. It is the worst of
//   - trainproof's problems (each diagnostic carries its rule's level in `data.level`),
//   - the latest verdict of each live run's verdict stream (trainproof-verdict.jsonl,
//     written by the training callbacks; docs/guardian.md),
//   - the last "Run doctor on folder" result.
import { Diagnostic, DiagnosticSeverity, Disposable, StatusBarAlignment, StatusBarItem, ThemeColor, Uri, languages, window, workspace } from 'vscode';
import { CLIENT_COMMANDS, SERVER_NAME, VERDICT_STREAM_GLOB } from './constants';
import { ServerState } from './server';

export type Verdict = 'FAIL' | 'WARN' | 'NOT-CHECKED' | 'PASS';

const RANK: Record<Verdict, number> = { FAIL: 3, WARN: 2, 'NOT-CHECKED': 1, PASS: 0 };

export function isVerdict(value: unknown): value is Verdict {
    return typeof value === 'string' && value in RANK;
}

export function worst(verdicts: Iterable<Verdict>): Verdict | undefined {
    let out: Verdict | undefined;
    for (const v of verdicts) {
        if (out === undefined || RANK[v] > RANK[out]) {
            out = v;
        }
    }
    return out;
}

/** A trainproof diagnostic's level: `data.level` (FAIL/WARN/NOT-CHECKED/INFO), else its
 *  severity. INFO findings and the "N more not shown" note count as PASS. */
export function diagnosticVerdict(d: Pick<Diagnostic, 'severity' | 'source'> & { data?: unknown }): Verdict | undefined {
    if (d.source !== SERVER_NAME) {
        return undefined;
    }
    const level = (d.data as { level?: unknown } | undefined)?.level;
    if (isVerdict(level)) {
        return level;
    }
    if (level === 'INFO') {
        return 'PASS';
    }
    if (d.severity === DiagnosticSeverity.Error) {
        return 'FAIL';
    }
    return d.severity === DiagnosticSeverity.Warning ? 'WARN' : 'PASS';
}

/** The run's current verdict from its verdict stream: the last `verdict` (or `stop`)
 *  line; a partial last line (the writer is mid-write) and unknown lines are skipped. */
export function streamVerdict(text: string): { verdict: Verdict; step?: number } | undefined {
    const lines = text.split('\n');
    for (let i = lines.length - 1; i >= 0; i--) {
        const line = lines[i].trim();
        if (!line) {
            continue;
        }
        let event: { event?: unknown; verdict?: unknown; step?: unknown };
        try {
            event = JSON.parse(line);
        } catch {
            continue;
        }
        if ((event.event === 'verdict' || event.event === 'stop') && isVerdict(event.verdict)) {
            return { verdict: event.verdict, step: typeof event.step === 'number' ? event.step : undefined };
        }
    }
    return undefined;
}

export interface StatusView {
    text: string;
    tooltip: string;
    error: boolean;
    warning: boolean;
}

const ICON: Record<Verdict, string> = { FAIL: '$(error)', WARN: '$(warning)', 'NOT-CHECKED': '$(question)', PASS: '$(pass)' };

export function statusView(server: ServerState, verdict: Verdict | undefined, counts: Record<Verdict, number>,
    streams: number, serverDetail?: string): StatusView {
    if (server === 'failed' || server === 'stopped') {
        return { text: '$(circle-slash) trainproof', tooltip: `trainproof: server ${server}${serverDetail ? ` — ${serverDetail}` : ''}. Click for the output.`,
            error: server === 'failed', warning: false };
    }
    if (server === 'starting') {
        return { text: '$(sync~spin) trainproof', tooltip: 'trainproof: starting the language server', error: false, warning: false };
    }
    if (verdict === undefined) {
        return { text: '$(pass) trainproof', tooltip: 'trainproof: nothing judged yet — open a training log or run "trainproof: Run doctor on folder"', error: false, warning: false };
    }
    const parts = (['FAIL', 'WARN', 'NOT-CHECKED'] as Verdict[]).filter((v) => counts[v] > 0).map((v) => `${counts[v]} ${v}`);
    const detail = parts.length ? `${parts.join(', ')} problem(s)` : 'no FAIL or WARN problems';
    return {
        text: `${ICON[verdict]} trainproof: ${verdict}`,
        tooltip: `trainproof: worst verdict in the workspace is ${verdict} — ${detail}` +
            (streams ? `; ${streams} live run(s) with a verdict stream` : '') + '. Click for the problems.',
        error: verdict === 'FAIL',
        warning: verdict === 'WARN',
    };
}

export class VerdictStatus implements Disposable {
    private readonly item: StatusBarItem;
    private readonly disposables: Disposable[] = [];
    private readonly streams = new Map<string, Verdict>();
    private doctor: Verdict | undefined;
    private server: ServerState = 'starting';
    private serverDetail: string | undefined;

    constructor() {
        this.item = window.createStatusBarItem('trainproof.verdict', StatusBarAlignment.Left, 50);
        this.item.name = 'trainproof verdict';
        this.disposables.push(this.item, languages.onDidChangeDiagnostics(() => this.render()));
        const watcher = workspace.createFileSystemWatcher(VERDICT_STREAM_GLOB);
        this.disposables.push(watcher, watcher.onDidCreate((u) => this.readStream(u)),
            watcher.onDidChange((u) => this.readStream(u)),
            watcher.onDidDelete((u) => { this.streams.delete(u.toString()); this.render(); }));
        void workspace.findFiles(VERDICT_STREAM_GLOB, '**/node_modules/**', 100).then(
            (uris) => Promise.all(uris.map((u) => this.readStream(u))), () => undefined);
        this.render();
        this.item.show();
    }

    setServerState(state: ServerState, detail?: string): void {
        this.server = state;
        this.serverDetail = detail;
        this.render();
    }

    setDoctorVerdict(verdict: unknown): void {
        this.doctor = isVerdict(verdict) ? verdict : this.doctor;
        this.render();
    }

    async readStream(uri: Uri): Promise<void> {
        try {
            const text = Buffer.from(await workspace.fs.readFile(uri)).toString('utf8');
            const current = streamVerdict(text);
            if (current) {
                this.streams.set(uri.toString(), current.verdict);
            }
        } catch {
            this.streams.delete(uri.toString());
        }
        this.render();
    }

    /** The verdict shown now (for tests and the e2e check). */
    current(): Verdict | undefined {
        return worst(this.verdicts().all);
    }

    private verdicts(): { all: Verdict[]; counts: Record<Verdict, number> } {
        const counts: Record<Verdict, number> = { FAIL: 0, WARN: 0, 'NOT-CHECKED': 0, PASS: 0 };
        const all: Verdict[] = [];
        for (const [, diagnostics] of languages.getDiagnostics()) {
            for (const d of diagnostics) {
                const v = diagnosticVerdict(d as Diagnostic & { data?: unknown });
                if (v) {
                    counts[v] += 1;
                    all.push(v);
                }
            }
        }
        all.push(...this.streams.values());
        if (this.doctor) {
            all.push(this.doctor);
        }
        return { all, counts };
    }

    private render(): void {
        const { all, counts } = this.verdicts();
        const view = statusView(this.server, worst(all), counts, this.streams.size, this.serverDetail);
        this.item.text = view.text;
        this.item.tooltip = view.tooltip;
        this.item.backgroundColor = view.error ? new ThemeColor('statusBarItem.errorBackground')
            : view.warning ? new ThemeColor('statusBarItem.warningBackground') : undefined;
        this.item.command = this.server === 'failed' || this.server === 'stopped'
            ? CLIENT_COMMANDS.showOutput : 'workbench.actions.view.problems';
    }

    dispose(): void {
        for (const d of this.disposables.splice(0)) {
            d.dispose();
        }
    }
}

