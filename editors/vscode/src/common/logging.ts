// The "trainproof" output channel: the client's own log lines and the server's stderr and
// window/logMessage go to one LogOutputChannel (Trainproof: Show output).
import * as util from 'util';
import { Disposable, LogOutputChannel } from 'vscode';

type Arguments = unknown[];

let channel: LogOutputChannel | undefined;

export function registerLogger(output: LogOutputChannel): Disposable {
    channel = output;
    return { dispose: () => { channel = undefined; } };
}

function format(args: Arguments): string {
    return args.map((a) => (typeof a === 'string' ? a : util.inspect(a, { depth: 4, breakLength: Infinity }))).join(' ');
}

export function traceLog(...args: Arguments): void { channel?.appendLine(format(args)); }
export function traceError(...args: Arguments): void { channel?.error(format(args)); }
export function traceWarn(...args: Arguments): void { channel?.warn(format(args)); }
export function traceInfo(...args: Arguments): void { channel?.info(format(args)); }
export function traceVerbose(...args: Arguments): void { channel?.debug(format(args)); }
