// "Show run": the run report page in a webview beside the log, one panel per log. The
// server judges the run and draws the page (trainproof.showRun: the page `doctor --html`
// writes, trainproof_lsp/output/html.py); this module finds the log, asks, and shows the
// answer. The page carries its own Content-Security-Policy (default-src 'none') and the
// panel runs no scripts and loads no local resources.
import * as path from 'path';
import { Disposable, Uri, ViewColumn, WebviewPanel, window } from 'vscode';
import { traceError, traceInfo } from './logging';

export const RUN_VIEW_TYPE = 'trainproof.run';

/** The server's answer (trainproof_lsp/server/commands.py, `_show_run`). */
export interface ShowRunResult {
    status?: string;
    html?: string;
    title?: string;
    message?: string;
}

/** The log to show: the lens's argument (a path or a file: URI), else the active editor's
 *  file (the command palette passes nothing), else the log of the run panel in front. */
export function showRunTarget(args: readonly unknown[], active: Uri | undefined, shown?: string): string | undefined {
    const [given] = args;
    if (typeof given === 'string' && given) {
        return given.startsWith('file:') ? Uri.parse(given).fsPath : given;
    }
    const uri = given instanceof Uri ? given : active;
    return uri && uri.scheme === 'file' ? uri.fsPath : shown;
}

export class RunPanels implements Disposable {
    private readonly panels = new Map<string, WebviewPanel>();

    /** Ask the server for the page of the log in `args` (through `send`, the LanguageClient's
     *  own workspace/executeCommand) and show it. The server's answer is returned as is. */
    async show(args: readonly unknown[], send: (args: unknown[]) => Promise<unknown>): Promise<unknown> {
        const log = showRunTarget(args, window.activeTextEditor?.document.uri, this.activeLog());
        if (!log) {
            void window.showWarningMessage('trainproof: Show run: open a training log first');
            return undefined;
        }
        let result: ShowRunResult | undefined;
        try {
            result = (await send([log])) as ShowRunResult | undefined;
        } catch (e) {
            traceError(`Show run ${log}: ${e}`);
            void window.showErrorMessage(`trainproof: Show run failed: ${e instanceof Error ? e.message : String(e)}`);
            return undefined;
        }
        if (result?.status === 'done' && typeof result.html === 'string') {
            this.present(log, result.title || path.basename(log), result.html);
        } else if (result?.status && result.status !== 'done') {
            // The server has said why in a message (nothing to show, unreadable, cancelled, stopped).
            traceInfo(`Show run ${log}: ${result.status}${result.message ? `: ${result.message}` : ''}`);
        } else {
            void window.showErrorMessage(`trainproof: Show run: no page for ${log} (${result?.status ?? 'no answer'})`);
        }
        return result;
    }

    /** The log whose panel has the focus (the palette's command then refreshes it). */
    private activeLog(): string | undefined {
        return [...this.panels].find(([, panel]) => panel.active)?.[0];
    }

    /** The panel of `log`, created beside the active editor or revealed where it is, with
     *  the new page. */
    private present(log: string, title: string, html: string): void {
        let panel = this.panels.get(log);
        if (panel) {
            panel.reveal(undefined, true);
        } else {
            const created = window.createWebviewPanel(RUN_VIEW_TYPE, title,
                { viewColumn: ViewColumn.Beside, preserveFocus: true },
                { enableScripts: false, enableFindWidget: true, localResourceRoots: [] });
            created.onDidDispose(() => {
                if (this.panels.get(log) === created) {
                    this.panels.delete(log);
                }
            });
            this.panels.set(log, created);
            panel = created;
        }
        panel.title = title;
        panel.webview.html = html;
    }

    dispose(): void {
        for (const panel of [...this.panels.values()]) {
            panel.dispose();
        }
        this.panels.clear();
    }
}
