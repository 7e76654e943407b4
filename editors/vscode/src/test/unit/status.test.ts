import * as assert from 'assert';
import { diagnosticVerdict, statusView, streamVerdict, worst } from '../../common/status';

const counts = { FAIL: 0, WARN: 0, 'NOT-CHECKED': 0, PASS: 0 };

describe('status bar: the worst verdict', () => {
    it('orders FAIL > WARN > NOT-CHECKED > PASS', () => {
        assert.strictEqual(worst(['PASS', 'NOT-CHECKED', 'WARN']), 'WARN');
        assert.strictEqual(worst(['PASS', 'FAIL', 'WARN']), 'FAIL');
        assert.strictEqual(worst([]), undefined);
    });

    it('reads a diagnostic\'s level from its data, and ignores other linters', () => {
        assert.strictEqual(diagnosticVerdict({ source: 'trainproof', severity: 2, data: { level: 'NOT-CHECKED' } }), 'NOT-CHECKED');
        assert.strictEqual(diagnosticVerdict({ source: 'trainproof', severity: 2, data: { level: 'INFO' } }), 'PASS');
        assert.strictEqual(diagnosticVerdict({ source: 'trainproof', severity: 0 }), 'FAIL');
        assert.strictEqual(diagnosticVerdict({ source: 'trainproof', severity: 1 }), 'WARN');
        assert.strictEqual(diagnosticVerdict({ source: 'pylint', severity: 0 }), undefined);
    });

    it('takes a live run\'s verdict from the last verdict line of its stream, skipping a partial line', () => {
        const stream = [
            JSON.stringify({ event: 'verdict', step: 1, verdict: 'PASS' }),
            JSON.stringify({ event: 'verdict', step: 5, verdict: 'FAIL', previous: 'PASS' }),
            JSON.stringify({ event: 'stall', step: 9 }),
            '{"event": "verdict", "step": 12, "verd',
        ].join('\n');
        assert.deepStrictEqual(streamVerdict(stream), { verdict: 'FAIL', step: 5 });
        assert.deepStrictEqual(streamVerdict(JSON.stringify({ event: 'stop', step: 15, verdict: 'FAIL' })), { verdict: 'FAIL', step: 15 });
        assert.strictEqual(streamVerdict(''), undefined);
    });

    it('shows the verdict with its counts, and the server state when it is not running', () => {
        const fail = statusView('running', 'FAIL', { ...counts, FAIL: 4, WARN: 1 }, 1);
        assert.strictEqual(fail.text, '$(error) trainproof: FAIL');
        assert.match(fail.tooltip, /4 FAIL, 1 WARN problem\(s\); 1 live run/);
        assert.ok(fail.error);
        assert.strictEqual(statusView('running', undefined, counts, 0).text, '$(pass) trainproof');
        assert.match(statusView('failed', 'FAIL', counts, 0, 'python3 is Python 3.8').tooltip, /server failed — python3 is Python 3\.8/);
        assert.strictEqual(statusView('starting', undefined, counts, 0).text, '$(sync~spin) trainproof');
    });
});
