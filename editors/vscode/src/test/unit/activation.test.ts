// When the extension starts and what its server is sent: it activates on the files the
// tool owns (package.json `workspaceContains:` on ARTEFACT_GLOBS, and its own languages),
// never on every JSON or Python file; the server gets every JSON, CSV and Python file only
// where the workspace holds training artefacts or the user asked (setting or command).
// tests/test_vscode_activation.py checks ARTEFACT_GLOBS against the table of formats.
import * as assert from 'assert';
import * as path from 'path';
import { registerCommands } from '../../common/commands';
import {
    ARTEFACT_GLOBS, ARTEFACT_SEARCH_EXCLUDE, CLIENT_COMMANDS, DOCUMENT_PATTERN, OWNED_DOCUMENT_PATTERN,
} from '../../common/constants';
import { documentSelector, judgesEveryJsonAndPython } from '../../common/server';
import { registeredCommands, resetState, state } from './vscodeMock';

const ROOT = path.join(__dirname, '..', '..', '..');
// eslint-disable-next-line @typescript-eslint/no-var-requires
const packageJSON = require(path.join(ROOT, 'package.json'));

/** A VS Code glob (`**`, `*`, `{a,b}`) as a regular expression over `/`-separated paths. */
function globRegExp(glob: string): RegExp {
    let out = '';
    for (let i = 0; i < glob.length; i++) {
        const c = glob[i];
        if (glob.startsWith('**/', i)) {
            out += '(?:.*/)?';
            i += 2;
        } else if (c === '*') {
            out += '[^/]*';
        } else if (c === '{') {
            out += '(?:';
        } else if (c === '}') {
            out += ')';
        } else if (c === ',') {
            out += '|';
        } else {
            out += c.replace(/[.+?^$()|[\]\\]/g, '\\$&');
        }
    }
    return new RegExp(`^${out}$`);
}

const OWNED = ['runs/a/trainer_state.json', 'data/train.jsonl', 'logs/metrics.ndjson', 'lightning_logs/version_0/metrics.csv',
    'model/tokenizer_config.json', 'model/chat_template.jinja', 'model/adapter_config.json'];
const NOT_OWNED = ['package.json', 'src/app.py', 'train.py', 'data/table.csv', 'model/config.json', 'tsconfig.json', 'runs/x.tsv'];

describe('activation and the documents the server gets', () => {
    beforeEach(resetState);

    it('activates on the training artefacts and the tool\'s own languages, never on every JSON, CSV or Python file', () => {
        const events: string[] = packageJSON.activationEvents;
        assert.deepStrictEqual(events, [...ARTEFACT_GLOBS.map((g) => `workspaceContains:${g}`), 'onLanguage:jsonl',
            'onLanguage:trainproof-log']);
        for (const broad of ['onLanguage:json', 'onLanguage:jsonc', 'onLanguage:python', 'onLanguage:csv', 'onLanguage:tsv',
            '*', 'onStartupFinished', 'workspaceContains:**/*.json', 'workspaceContains:**/*.py']) {
            assert.ok(!events.includes(broad), broad);
        }
        const jsonl = packageJSON.contributes.languages.find((l: { id: string }) => l.id === 'jsonl');
        assert.deepStrictEqual(jsonl.extensions, ['.jsonl', '.ndjson']);
    });

    it('offers the setting and the command that ask for every JSON and Python file', () => {
        const setting = packageJSON.contributes.configuration.properties['trainproof.jsonAndPython'];
        assert.deepStrictEqual([setting.enum, setting.default], [['auto', 'always'], 'auto']);
        const command = packageJSON.contributes.commands.find((c: { command: string }) => c.command === CLIENT_COMMANDS.checkJsonAndPython);
        assert.strictEqual(command.title, 'Check JSON and Python files in this workspace');
    });

    it('sends the owned files anywhere, every JSON, CSV and Python file only when asked', () => {
        const [owned] = documentSelector(false);
        const [every] = documentSelector(true);
        assert.deepStrictEqual([owned.scheme, owned.pattern, every.scheme, every.pattern],
            ['file', OWNED_DOCUMENT_PATTERN, 'file', DOCUMENT_PATTERN]);
        const ownedRe = globRegExp(OWNED_DOCUMENT_PATTERN);
        const everyRe = globRegExp(DOCUMENT_PATTERN);
        for (const p of OWNED) {
            assert.ok(ownedRe.test(p) && everyRe.test(p), p);
        }
        for (const p of NOT_OWNED) {
            assert.ok(!ownedRe.test(p), p);
        }
        for (const p of ['package.json', 'src/app.py', 'data/table.csv', 'model/config.json', 'runs/x.tsv']) {
            assert.ok(everyRe.test(p), p);
        }
        // The artefact names that are JSON or CSV documents are owned in any workspace.
        for (const glob of ARTEFACT_GLOBS) {
            const name = glob.replace('**/', 'run/');
            if (/\.(json|jsonl|csv|jinja)$/.test(name)) {
                assert.ok(ownedRe.test(name), name);
            }
        }
    });

    it('judges every JSON and Python file where the workspace holds an artefact, or when the setting says always', async () => {
        const searches: [string, string, number][] = [];
        const finding = (found: unknown[]) => async (include: string, exclude: string, max: number) => {
            searches.push([include, exclude, max]);
            return found;
        };
        const always = await judgesEveryJsonAndPython('always', finding([]));
        assert.deepStrictEqual(always, { every: true, why: 'trainproof.jsonAndPython is "always"' });
        assert.strictEqual(searches.length, 0);  // no search needed

        const held = await judgesEveryJsonAndPython('auto', finding([{ fsPath: '/ws/run/trainer_state.json' }]));
        assert.deepStrictEqual(held, { every: true, why: 'the workspace holds training artefacts (/ws/run/trainer_state.json)' });
        assert.deepStrictEqual(searches[0], [`{${ARTEFACT_GLOBS.join(',')}}`, ARTEFACT_SEARCH_EXCLUDE, 1]);

        assert.deepStrictEqual(await judgesEveryJsonAndPython('auto', finding([])),
            { every: false, why: 'the workspace holds no training artefact' });
        const failing = async () => { throw new Error('no search provider'); };
        assert.strictEqual((await judgesEveryJsonAndPython(undefined, failing)).every, false);
        // A search that never answers does not hold the server back.
        const never = () => new Promise<readonly unknown[]>(() => undefined);
        assert.deepStrictEqual(await judgesEveryJsonAndPython('auto', never, 1),
            { every: false, why: 'no training artefact found in 0.001 s' });
    });

    it('the command sets the workspace\'s setting to always (the change restarts the server)', async () => {
        const disposables = registerCommands({ output: {}, execute: async () => undefined, restart: async () => undefined,
            onDoctorResult: () => undefined, onResult: () => undefined } as never);
        try {
            state.workspaceFolders = [{ uri: { fsPath: '/ws' } as never, name: 'ws', index: 0 }];
            await registeredCommands.get(CLIENT_COMMANDS.checkJsonAndPython)!();
            assert.deepStrictEqual(state.updates, [['trainproof.jsonAndPython', 'always', 2]]);  // ConfigurationTarget.Workspace
            state.configuration['trainproof.jsonAndPython'] = 'always';
            await registeredCommands.get(CLIENT_COMMANDS.checkJsonAndPython)!();
            assert.strictEqual(state.updates.length, 1);  // already on: nothing to change
        } finally {
            disposables.forEach((d) => d.dispose());
        }
    });
});
