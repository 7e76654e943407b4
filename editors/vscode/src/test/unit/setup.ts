// Mocha --require: `require('vscode')` returns the mock (vscodeMock.ts).
import Module = require('module');
import { vscode } from './vscodeMock';

type Load = (request: string, parent: unknown, isMain: boolean) => unknown;
const moduleWithLoad = Module as unknown as { _load: Load };
const load = moduleWithLoad._load;
moduleWithLoad._load = function (request: string, parent: unknown, isMain: boolean) {
    return request === 'vscode' ? vscode : load.call(this, request, parent, isMain);
};
