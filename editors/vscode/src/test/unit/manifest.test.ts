// package.json against the server: every server setting is contributed with the server's
// default, type and bounds (trainproof_lsp/server/settings.py is the definition), the
// client's command ids never collide with the server's (vscode-languageclient registers
// those itself), the server commands the client presents are the server's, and the
// manifest declares what the extension relies on.
import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import {
    CLIENT_COMMANDS, CLIENT_ONLY_SETTINGS, PRESENTED_SERVER_COMMANDS, SERVER_COMMANDS, WATCHED_GLOBS,
} from '../../common/constants';
import { RESTRICTED_SETTINGS, UNTRUSTED_OVERRIDES } from '../../common/settings';

const ROOT = path.join(__dirname, '..', '..', '..');
const REPO = path.join(ROOT, '..', '..');
// eslint-disable-next-line @typescript-eslint/no-var-requires
const packageJSON = require(path.join(ROOT, 'package.json'));
const properties: Record<string, Record<string, unknown>> = packageJSON.contributes.configuration.properties;

// The server's own description of its settings, in JSON-schema terms.
const DUMP = `
import dataclasses, json, typing
from trainproof_lsp.server import settings as s, commands as c

def schema(t):
    args = typing.get_args(t)
    if type(None) in args:
        inner = [a for a in args if a is not type(None)][0]
        return [schema(inner), "null"]
    if typing.get_origin(t) is tuple:
        return "array"
    return {int: "integer", float: "number", bool: "boolean", str: "string"}[t]

hints = typing.get_type_hints(s.Settings)
settings = {}
for f in dataclasses.fields(s.Settings):
    default = f.default
    settings[s._SNAKE_TO_CAMEL[f.name]] = {
        "type": schema(hints[f.name]),
        "default": list(default) if isinstance(default, tuple) else default,
        "range": s._RANGES.get(f.name),
    }
print(json.dumps({"section": s.SECTION, "settings": settings, "commands": list(c.ALL)}))
`;

interface ServerDump {
    section: string;
    settings: Record<string, { type: string | string[]; default: unknown; range: [number, number] | null }>;
    commands: string[];
}

function candidatePythons(): string[] {
    const venv = path.join(REPO, '.venv', 'bin', 'python');
    return [process.env.TP_PYTHON, fs.existsSync(venv) ? venv : undefined, 'python3'].filter((p): p is string => !!p);
}

function dumpServer(): ServerDump | string {
    const errors: string[] = [];
    for (const python of candidatePythons()) {
        try {
            const out = execFileSync(python, ['-c', DUMP], { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
            return JSON.parse(out) as ServerDump;
        } catch (e) {
            errors.push(`${python}: ${String((e as { stderr?: string }).stderr ?? e).trim().split('\n').pop()}`);
        }
    }
    return errors.join('; ');
}

describe('package.json against the server', function () {
    let server: ServerDump;

    before(function () {
        const got = dumpServer();
        if (typeof got === 'string') {
            if (process.env.CI || process.env.TP_PYTHON) {
                throw new Error(`cannot read the server's settings: ${got}`);
            }
            console.warn(`    (skipped: no Python with trainproof_lsp and its lsp extra: ${got}; set TP_PYTHON)`);
            this.skip();
        }
        server = got as ServerDump;
    });

    it('contributes exactly the server\'s settings, plus the client\'s own', () => {
        const contributed = Object.keys(properties).map((k) => k.slice(`${server.section}.`.length));
        const expected = [...Object.keys(server.settings), ...CLIENT_ONLY_SETTINGS];
        assert.deepStrictEqual([...contributed].sort(), [...expected].sort());
    });

    it('gives each server setting the server\'s default, type and bounds', () => {
        for (const [name, def] of Object.entries(server.settings)) {
            const prop = properties[`${server.section}.${name}`];
            assert.deepStrictEqual(prop.default, def.default, `${name}: default`);
            assert.deepStrictEqual(prop.type, def.type, `${name}: type`);
            if (def.type === 'array') {
                assert.deepStrictEqual(prop.items, { type: 'string' }, `${name}: items`);
            }
            assert.deepStrictEqual(def.range ? [prop.minimum, prop.maximum] : [undefined, undefined],
                def.range ?? [undefined, undefined], `${name}: bounds`);
            assert.ok(prop.description || prop.markdownDescription, `${name}: description`);
        }
    });

    it('wraps only commands the server has, under ids the server does not use', () => {
        for (const id of Object.values(SERVER_COMMANDS)) {
            assert.ok(server.commands.includes(id), `${id} is not a server command`);
        }
        for (const id of Object.values(CLIENT_COMMANDS) as string[]) {
            assert.ok(!(server.commands as string[]).includes(id), `${id} collides with the server's command`);
        }
        for (const id of PRESENTED_SERVER_COMMANDS) {
            assert.ok(server.commands.includes(id), `${id} is presented but is not a server command`);
        }
    });

    it('overrides only real settings in untrusted workspaces', () => {
        for (const name of Object.keys(UNTRUSTED_OVERRIDES)) {
            assert.ok(name in server.settings, name);
        }
    });

    it('restricts every server setting that holds a path, a command or text (numbers and switches only stay)', () => {
        for (const [name, def] of Object.entries(server.settings)) {
            const types = Array.isArray(def.type) ? def.type : [def.type];
            if (types.includes('string') || types.includes('array')) {
                assert.ok(RESTRICTED_SETTINGS.includes(name), `${name} names a path or command but is not restricted`);
            }
        }
    });
});

describe('package.json: the manifest', () => {
    it('contributes every client command and presented server command, and menus name only contributed commands', () => {
        const contributed = packageJSON.contributes.commands.map((c: { command: string }) => c.command).sort();
        assert.deepStrictEqual(contributed, [...Object.values(CLIENT_COMMANDS) as string[], ...PRESENTED_SERVER_COMMANDS].sort());
        for (const entries of Object.values(packageJSON.contributes.menus) as { command: string }[][]) {
            for (const entry of entries) {
                assert.ok(contributed.includes(entry.command), entry.command);
            }
        }
    });

    it('supports untrusted workspaces in a limited way and restricts the settings that name paths or run code', () => {
        const trust = packageJSON.capabilities.untrustedWorkspaces;
        assert.strictEqual(trust.supported, 'limited');
        assert.deepStrictEqual([...trust.restrictedConfigurations].sort(),
            RESTRICTED_SETTINGS.map((name) => `trainproof.${name}`).sort());
        for (const name of ['interpreter', 'importStrategy', ...Object.keys(UNTRUSTED_OVERRIDES)]) {
            assert.ok(RESTRICTED_SETTINGS.includes(name), name);
        }
        assert.match(trust.description, /static checks only/);
    });

    it('gives trainer_state.json a language of its own, highlighted by the JSON grammar and not JSON-validated', () => {
        const log = packageJSON.contributes.languages.find((l: { id: string }) => l.id === 'trainproof-log');
        assert.deepStrictEqual(log.filenames, ['trainer_state.json']);
        const grammar = packageJSON.contributes.grammars.find((g: { language: string }) => g.language === 'trainproof-log');
        const file = JSON.parse(fs.readFileSync(path.join(ROOT, grammar.path), 'utf8'));
        assert.strictEqual(file.scopeName, grammar.scopeName);
        assert.deepStrictEqual(file.patterns, [{ include: 'source.json' }]);
        assert.ok(packageJSON.activationEvents.includes('onLanguage:trainproof-log'));
        const ignore = fs.readFileSync(path.join(ROOT, '.vscodeignore'), 'utf8');
        assert.match(ignore, /^!syntaxes\/\*\*$/m);
        assert.match(ignore, /^!language-configuration\.json$/m);
    });

    it('associates .jsonl files and watches run files', () => {
        const jsonl = packageJSON.contributes.languages.find((l: { id: string }) => l.id === 'jsonl');
        assert.ok(jsonl.extensions.includes('.jsonl'));
        for (const glob of ['**/events.out.tfevents.*', '**/*.ckpt', '**/trainer_state.json', '**/trainproof-verdict.jsonl']) {
            assert.ok(WATCHED_GLOBS.includes(glob), glob);
        }
    });

    it('ships the bundled server and the bundled client only', () => {
        const ignore = fs.readFileSync(path.join(ROOT, '.vscodeignore'), 'utf8');
        assert.match(ignore, /^!bundled\/\*\*$/m);
        assert.match(ignore, /^!dist\/extension\.js$/m);
        assert.strictEqual(packageJSON.main, './dist/extension.js');
    });
});
