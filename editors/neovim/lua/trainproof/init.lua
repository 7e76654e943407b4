-- trainproof-lsp in Neovim: one setup() for Neovim 0.7 to 0.12.
--
--   require('trainproof').setup({ python = '/path/to/venv/bin/python' })
--
-- Neovim 0.11+: registers the server with vim.lsp.config('trainproof', ...) and
-- vim.lsp.enable('trainproof'). Neovim 0.7-0.10: starts it from a FileType autocmd
-- (vim.lsp.start on 0.8+, vim.lsp.start_client + buf_attach_client on 0.7). Either way
-- each attached buffer gets the keymaps below and code lenses that refresh by themselves.
-- docs/editor.md and editors/neovim/README.md describe the options.
local M = {}

M.defaults = {
  -- The Python that has trainproof-lsp installed (editors/neovim/README.md: how to install it).
  -- nil: $VIRTUAL_ENV's python, else python3.
  python = nil,
  -- The whole command, instead of `python -m trainproof_lsp serve`.
  cmd = nil,
  -- The folder the server runs in. nil: this plugin's own folder. Never the workspace:
  -- `python -m` puts its working folder first on sys.path, so a cloned repository's
  -- `json.py` or `pygls/` would run on open (docs/security.md).
  cmd_cwd = nil,
  -- The files the server judges when opened: the `opened` formats of the table of formats
  -- (trainproof_lsp/core/formats.py); tests/test_formats.py fails when this list drifts.
  filetypes = { 'json', 'jsonl', 'csv', 'tsv', 'python', 'jinja' },
  -- The first folder upwards holding one of these is the workspace root.
  root_markers = { 'pyproject.toml', '.git' },
  -- The server's settings (section "trainproof"; names as in docs/editor.md), e.g.
  -- { maxDiagnosticsPerFile = 200, checkEnvironment = true }. Check environment imports
  -- with `python` on PATH (an activated virtual environment's) unless
  -- settings.python names the project's interpreter.
  settings = {},
  -- Buffer-local keymaps on attach; false for none, or a table overriding some of them.
  keymaps = {
    codelens_run = '<leader>tl',      -- run the code lens on this line (Run doctor, Compare...)
    codelens_refresh = '<leader>tr',  -- ask the server for the lenses again
    hover = 'K',                      -- the finding under the cursor: evidence, limits, rule docs
    diagnostics = '<leader>td',       -- this buffer's findings in the location list
  },
  -- Refresh code lenses on BufEnter, CursorHold and InsertLeave.
  codelens = true,
  -- Run doctor / Compare (the commands and the code lenses): their findings in the
  -- quickfix list, opened when there are any; false to fill it without opening it.
  open_quickfix = true,
  -- Called as on_attach(client, bufnr) after the keymaps are set.
  on_attach = nil,
}

local NAME = 'trainproof'
local config = vim.deepcopy(M.defaults)

local function has_new_api()
  return vim.lsp.config ~= nil and vim.lsp.enable ~= nil  -- Neovim 0.11+
end

local function python()
  if config.python then
    return config.python
  end
  local venv = vim.env.VIRTUAL_ENV
  if venv and venv ~= '' then
    return venv .. '/bin/python'
  end
  return 'python3'
end

function M.cmd()
  return config.cmd or { python(), '-m', 'trainproof_lsp', 'serve' }
end

-- This plugin's folder (editors/neovim): lua/trainproof/init.lua is two levels below it.
local PLUGIN_ROOT = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')

-- Where the server process runs: never the workspace (see cmd_cwd above).
function M.cmd_cwd()
  return config.cmd_cwd or PLUGIN_ROOT
end

-- The folder above `path` that holds a root marker, else the file's own folder.
function M.root_dir(path)
  local dir = vim.fn.fnamemodify(path, ':p:h')
  local uv = vim.uv or vim.loop
  local current = dir
  while current and current ~= '' do
    for _, marker in ipairs(config.root_markers) do
      if uv.fs_stat(current .. '/' .. marker) then
        return current
      end
    end
    local parent = vim.fn.fnamemodify(current, ':h')
    if parent == current then
      break
    end
    current = parent
  end
  return dir
end

-- Run doctor and Compare answer with their findings (trainproof_lsp/server/commands.py:
-- path, 0-based range, id, level, message); those go to the quickfix list.
local LISTED = { ['trainproof.doctor'] = true, ['trainproof.compare'] = true }
local QF_TYPE = { FAIL = 'E', WARN = 'W', ['NOT-CHECKED'] = 'I', INFO = 'I' }

local function text_of(value)
  return type(value) == 'string' and value or nil  -- JSON null arrives as vim.NIL
end

-- Quickfix items, one a finding, written as the command line writes them:
-- LEVEL RULE message (the rule left out of a count of findings not shown, or a file not judged).
function M.quickfix_items(findings)
  local items = {}
  for _, f in ipairs(type(findings) == 'table' and findings or {}) do
    local path = text_of(f.path)
    if path and path ~= '' then
      local start = type(f.range) == 'table' and f.range.start or { line = 0, character = 0 }
      local level = text_of(f.level) or 'INFO'
      local id = text_of(f.id)
      table.insert(items, {
        filename = path,
        lnum = start.line + 1,
        col = start.character + 1,
        type = QF_TYPE[level] or 'I',
        text = level .. ' ' .. (id and (id .. ' ') or '') .. (text_of(f.message) or ''),
      })
    end
  end
  return items
end

-- A command's answer: Run doctor's and Compare's findings replace the quickfix list,
-- titled with the command's summary; the list opens when it has any.
function M.show_findings(command, result)
  if not LISTED[command] or type(result) ~= 'table' or result.status ~= 'done' then
    return
  end
  local items = M.quickfix_items(result.findings)
  vim.fn.setqflist({}, ' ', { title = text_of(result.message) or command, items = items })
  if config.open_quickfix and #items > 0 then
    vim.cmd('botright copen')
  end
end

-- workspace/executeCommand on this buffer's trainproof server. The server shows each
-- command's outcome itself (window/showMessage); a failed request is notified here, and
-- Run doctor's and Compare's findings go to the quickfix list.
function M.execute(command, arguments, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  vim.lsp.buf_request(bufnr, 'workspace/executeCommand', { command = command, arguments = arguments or {} },
    function(err, result)
      if err then
        vim.notify('trainproof: ' .. (err.message or tostring(err)), vim.log.levels.ERROR)
        return
      end
      M.show_findings(command, result)
    end)
end

-- The code lenses' Run doctor and Compare run here on the client (client-side commands:
-- codelens.run calls them instead of sending the command itself), so their findings
-- reach the quickfix list as the user commands' do.
local function lens_command(command, ctx)
  M.execute(command.command, command.arguments, ctx and ctx.bufnr)
end

local function buffer_path(bufnr)
  return vim.api.nvim_buf_get_name(bufnr or 0)
end

function M.on_attach(client, bufnr)
  if client.name ~= NAME then
    return
  end
  local keys = config.keymaps
  if keys then
    local function map(lhs, rhs, desc)
      if lhs then
        vim.keymap.set('n', lhs, rhs, { buffer = bufnr, silent = true, desc = 'trainproof: ' .. desc })
      end
    end
    map(keys.codelens_run, vim.lsp.codelens.run, 'run the code lens on this line')
    map(keys.codelens_refresh, function() vim.lsp.codelens.refresh({ bufnr = bufnr }) end, 'refresh code lenses')
    map(keys.hover, vim.lsp.buf.hover, 'hover')
    map(keys.diagnostics, function() vim.diagnostic.setloclist({ open = true }) end, 'findings in the location list')
  end
  if config.codelens and client.server_capabilities.codeLensProvider then
    local group = vim.api.nvim_create_augroup('trainproof_codelens_' .. bufnr, { clear = true })
    vim.api.nvim_create_autocmd({ 'BufEnter', 'CursorHold', 'InsertLeave' }, {
      group = group,
      buffer = bufnr,
      callback = function() vim.lsp.codelens.refresh({ bufnr = bufnr }) end,
    })
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
  if config.on_attach then
    config.on_attach(client, bufnr)
  end
end

-- The configuration both paths share (vim.lsp.config / vim.lsp.start / start_client).
function M.lsp_config()
  local settings = config.settings or {}
  if next(settings) == nil then
    -- An empty Lua table is encoded as a JSON array ([]); the server wants an object.
    settings = vim.empty_dict()
  end
  local capabilities = nil
  local defaults = vim.lsp.protocol.make_client_capabilities()
  if not defaults.textDocument.codeLens then
    -- Neovim 0.7 shows code lenses (vim.lsp.codelens) but does not announce it, and the
    -- server offers lenses only to clients that do.
    defaults.textDocument.codeLens = { dynamicRegistration = false }
    capabilities = defaults
  end
  return {
    name = NAME,
    capabilities = capabilities,
    cmd = M.cmd(),
    cmd_cwd = M.cmd_cwd(),
    filetypes = config.filetypes,
    root_markers = config.root_markers,
    -- initializationOptions and the answer to workspace/configuration("trainproof")
    init_options = settings,
    settings = { trainproof = settings },
    commands = { ['trainproof.doctor'] = lens_command, ['trainproof.compare'] = lens_command },
    on_attach = M.on_attach,
  }
end

-- .jsonl and .tsv have no filetype on older Neovims.
local function add_filetypes()
  vim.api.nvim_create_autocmd({ 'BufRead', 'BufNewFile' }, {
    group = vim.api.nvim_create_augroup('trainproof_filetypes', { clear = true }),
    pattern = { '*.jsonl', '*.ndjson', '*.tsv' },
    callback = function(args)
      local ext = vim.fn.fnamemodify(args.file, ':e')
      if vim.bo[args.buf].filetype == '' or vim.bo[args.buf].filetype == 'text' then
        vim.bo[args.buf].filetype = ext == 'tsv' and 'tsv' or 'jsonl'
      end
    end,
  })
end

-- Neovim 0.7-0.10: one client per root folder, started on FileType.
local clients = {}

local function start_legacy(bufnr)
  local path = buffer_path(bufnr)
  if path == '' or vim.bo[bufnr].buftype ~= '' then
    return
  end
  local root = M.root_dir(path)
  local cfg = M.lsp_config()
  cfg.root_dir = root
  cfg.root_markers = nil
  cfg.filetypes = nil
  if vim.lsp.start then                              -- 0.8-0.10: reuses a client by name and root
    vim.lsp.start(cfg, { bufnr = bufnr })
    return
  end
  local id = clients[root]                           -- 0.7
  local client = id and vim.lsp.get_client_by_id(id)
  if not client or client.is_stopped() then
    cfg.workspace_folders = { { uri = vim.uri_from_fname(root), name = root } }
    id = vim.lsp.start_client(cfg)
    clients[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
end

local function commands()
  local function path_arg(opts)
    return opts.args ~= '' and vim.fn.fnamemodify(opts.args, ':p') or nil
  end
  vim.api.nvim_create_user_command('TrainproofDoctor', function(opts)
    M.execute('trainproof.doctor', { path_arg(opts) or M.root_dir(buffer_path()) })
  end, { nargs = '?', complete = 'file', desc = 'trainproof: run doctor on a folder (default: the workspace root)' })
  vim.api.nvim_create_user_command('TrainproofCompare', function(opts)
    M.execute('trainproof.compare', { path_arg(opts) or buffer_path() })
  end, { nargs = '?', complete = 'file', desc = 'trainproof: compare this run with the baseline' })
  vim.api.nvim_create_user_command('TrainproofSetBaseline', function(opts)
    M.execute('trainproof.setBaseline', { path_arg(opts) or buffer_path() })
  end, { nargs = '?', complete = 'file', desc = 'trainproof: use this run as the baseline' })
  vim.api.nvim_create_user_command('TrainproofCheckEnvironment', function(opts)
    M.execute('trainproof.checkEnvironment', { path_arg(opts) or buffer_path() })
  end, { nargs = '?', complete = 'file', desc = 'trainproof: import the training script\'s modules (checkEnvironment = true)' })
  -- The run report page: Neovim 0.11+ opens it in the browser (window/showDocument calls
  -- vim.ui.open); older ones get the path of the page the server wrote.
  vim.api.nvim_create_user_command('TrainproofShowRun', function(opts)
    M.execute('trainproof.showRun', { path_arg(opts) or buffer_path() })
  end, { nargs = '?', complete = 'file', desc = 'trainproof: the run report page of this log, in the browser' })
  vim.api.nvim_create_user_command('TrainproofInfo', function()
    M.execute('trainproof.showServerInfo', {})
  end, { desc = 'trainproof: server version, settings and documents' })
end

function M.setup(opts)
  config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  if opts and opts.keymaps == false then
    config.keymaps = false
  end
  add_filetypes()
  commands()
  if has_new_api() then
    vim.lsp.config(NAME, M.lsp_config())
    vim.lsp.enable(NAME)
  else
    vim.api.nvim_create_autocmd('FileType', {
      group = vim.api.nvim_create_augroup('trainproof_start', { clear = true }),
      pattern = config.filetypes,
      callback = function(args) start_legacy(args.buf) end,
    })
  end
  return M
end

return M
