-- Neovim 0.11+: with editors/neovim on 'runtimepath', `vim.lsp.enable('trainproof')` alone
-- starts the server with these defaults (no keymaps or code-lens refresh; use
-- require('trainproof').setup() for those).
-- The server runs in this plugin's folder, never the workspace (docs/security.md).
local plugin_root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h')
return {
  cmd_cwd = plugin_root,
  cmd = { vim.env.VIRTUAL_ENV and (vim.env.VIRTUAL_ENV .. '/bin/python') or 'python3', '-m', 'trainproof_lsp', 'serve' },
  -- The files the server judges when opened: the `opened` formats of the table of formats
  -- (trainproof_lsp/core/formats.py); tests/test_formats.py fails when this list drifts.
  filetypes = { 'json', 'jsonl', 'csv', 'tsv', 'python', 'jinja' },
  root_markers = { 'pyproject.toml', '.git' },
  -- vim.empty_dict(): an empty Lua table would go out as a JSON array, not an object.
  settings = { trainproof = vim.empty_dict() },
  -- The code lenses' Run doctor and Compare run through the plugin, which puts their
  -- findings in the quickfix list (lua/trainproof/init.lua).
  commands = {
    ['trainproof.doctor'] = function(command, ctx) require('trainproof').execute(command.command, command.arguments, ctx.bufnr) end,
    ['trainproof.compare'] = function(command, ctx) require('trainproof').execute(command.command, command.arguments, ctx.bufnr) end,
  },
}
