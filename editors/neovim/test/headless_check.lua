-- Headless check of editors/neovim's setup (tests/test_neovim_setup.py runs it):
--
--   TP_PYTHON=python TP_FILE=run/trainer_state.json TP_OUT=out.tsv \
--     nvim --headless --clean --cmd 'set rtp^=editors/neovim' -c 'luafile editors/neovim/test/headless_check.lua'
--
-- Calls require('trainproof').setup() as a user's init.lua would, opens TP_FILE, waits for
-- its diagnostics and code lenses, asks for hover at the first finding through the
-- buffer's keymap, and writes what the editor got:
--   # nvim X.Y.Z api=<config|start|start_client> ok=<true|false>
--   diag TAB <1-based line> TAB <code> TAB <severity> TAB <message>
--   lens TAB <1-based line> TAB <title>
--   keymap TAB <lhs> TAB <desc>
--   message TAB <a message shown while the buffer was opened and judged>
--   hover TAB <the hover text, 300 characters>
--   command TAB TrainproofSetBaseline TAB <messages shown> TAB <the server's message>
--   qfopen TAB <source> TAB <true when a quickfix window is open>
--   qftitle TAB <source> TAB <the quickfix list's title>
--   qf TAB <source> TAB <file> TAB <lnum> TAB <col> TAB <type> TAB <text>
-- where <source> is `command` (:TrainproofDoctor on the log's folder) or `lens` (the
-- log's "Run doctor" code lens, through codelens.run).
local out_path = os.getenv('TP_OUT') or 'nvim_setup.tsv'
local file = os.getenv('TP_FILE')
local timeout = tonumber(os.getenv('TP_TIMEOUT_MS') or '30000')
local lines = {}
local function emit(s) table.insert(lines, s) end

vim.g.mapleader = ' '
-- Every message the server shows from the start (window/showMessage, and vim.notify,
-- through which newer Neovims show it): a settings warning on start would show here.
local started = {}
local startup_notify = vim.notify
vim.notify = function(msg, ...)
  table.insert(started, tostring(msg))
  return startup_notify(msg, ...)
end
local startup_show = vim.lsp.handlers['window/showMessage']
vim.lsp.handlers['window/showMessage'] = function(err, result, ctx, config)
  table.insert(started, result and result.message or '')
  return startup_show(err, result, ctx, config)
end
local trainproof = require('trainproof')
-- As a user's init.lua calls it: no settings, so the server gets the defaults (an empty
-- object, which an empty Lua table must not turn into a JSON array).
trainproof.setup({ python = os.getenv('TP_PYTHON') })
vim.cmd('edit ' .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()

local got_diagnostics = vim.wait(timeout, function() return #vim.diagnostic.get(buf) > 0 end, 50)
local function lenses() return vim.lsp.codelens.get(buf) or {} end
local got_lenses = vim.wait(timeout, function()
  if #lenses() == 0 then vim.lsp.codelens.refresh({ bufnr = buf }) end
  return #lenses() > 0 and lenses()[1].command ~= nil
end, 200)

local v = vim.version()
local api = vim.lsp.config and 'config' or (vim.lsp.start and 'start' or 'start_client')
emit(string.format('# nvim %d.%d.%d api=%s ok=%s', v.major, v.minor, v.patch, api,
  tostring(got_diagnostics and got_lenses)))
for _, d in ipairs(vim.diagnostic.get(buf)) do
  local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
  emit(string.format('diag\t%d\t%s\t%d\t%s', d.lnum + 1, tostring(code), d.severity, (d.message:gsub('[\t\n]', ' '))))
end
for _, lens in ipairs(lenses()) do
  if lens.command then
    emit(string.format('lens\t%d\t%s', lens.range.start.line + 1, lens.command.title))
  end
end
for _, m in ipairs(vim.api.nvim_buf_get_keymap(buf, 'n')) do
  if m.desc and m.desc:find('^trainproof') then
    emit(string.format('keymap\t%s\t%s', m.lhs:gsub(' ', '<Space>'), m.desc))
  end
end

vim.notify = startup_notify
vim.lsp.handlers['window/showMessage'] = startup_show
for _, msg in ipairs(started) do
  emit('message\t' .. msg:gsub('%s+', ' '))
end

-- Hover through the buffer's K mapping: capture what the hover handler would show.
local first = nil
for _, d in ipairs(vim.diagnostic.get(buf)) do
  if tostring(d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)) == 'TP-DIVERGE' then first = d end
end
if first then
  vim.api.nvim_win_set_cursor(0, { first.lnum + 1, first.col })
  local hovered = nil
  local original = vim.lsp.util.open_floating_preview
  vim.lsp.util.open_floating_preview = function(contents, ...)
    hovered = type(contents) == 'table' and table.concat(contents, ' ') or tostring(contents)
    return original(contents, ...)
  end
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('K', true, false, true), 'x', false)
  vim.wait(10000, function() return hovered ~= nil end, 50)
  vim.lsp.util.open_floating_preview = original
  emit('hover\t' .. (hovered and hovered:gsub('%s+', ' '):sub(1, 300) or ''))
end

-- A user command through workspace/executeCommand: the server answers with a message
-- (window/showMessage; the setup itself notifies only a failed request). Every message
-- shown is counted, so a message shown twice would show here.
local notes = {}
local in_handler = false  -- newer Neovims show window/showMessage through vim.notify
local notify = vim.notify
vim.notify = function(msg, ...)
  if not in_handler then table.insert(notes, msg) end
  return notify(msg, ...)
end
local show_message = vim.lsp.handlers['window/showMessage']
vim.lsp.handlers['window/showMessage'] = function(err, result, ctx, config)
  table.insert(notes, result and result.message or '')
  in_handler = true
  local ok, value = pcall(show_message, err, result, ctx, config)
  in_handler = false
  if not ok then error(value) end
  return value
end
vim.cmd('TrainproofSetBaseline')
vim.wait(10000, function() return #notes > 0 end, 50)
vim.wait(300, function() return #notes > 1 end, 50)  -- a second copy, if one comes
vim.notify = notify
vim.lsp.handlers['window/showMessage'] = show_message
emit('command\tTrainproofSetBaseline\t' .. #notes .. '\t' .. (notes[1] or ''):gsub('%s+', ' '))

-- Run doctor fills the quickfix list: from the user command, then from the code lens.
local function quickfix_window_open()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.bo[vim.api.nvim_win_get_buf(win)].buftype == 'quickfix' then return true end
  end
  return false
end
local function emit_quickfix(source)
  local qf = vim.fn.getqflist({ title = 1, items = 1 })
  emit('qfopen\t' .. source .. '\t' .. tostring(quickfix_window_open()))
  emit('qftitle\t' .. source .. '\t' .. (qf.title or ''))
  for _, item in ipairs(qf.items) do
    emit(string.format('qf\t%s\t%s\t%d\t%d\t%s\t%s', source, vim.api.nvim_buf_get_name(item.bufnr), item.lnum,
      item.col, item.type, (item.text:gsub('[\t\n]', ' '))))
  end
end
local log_win = vim.api.nvim_get_current_win()
vim.fn.setqflist({}, 'f')
vim.cmd('TrainproofDoctor ' .. vim.fn.fnameescape(vim.fn.fnamemodify(file, ':p:h')))
vim.wait(timeout, function() return #vim.fn.getqflist() > 0 end, 50)
emit_quickfix('command')

vim.cmd('cclose')
vim.fn.setqflist({}, 'f')
vim.api.nvim_set_current_win(log_win)
local doctor_lens = nil
for _, lens in ipairs(lenses()) do
  if lens.command and lens.command.title == 'Run doctor' then doctor_lens = lens end
end
if doctor_lens then
  vim.api.nvim_win_set_cursor(log_win, { doctor_lens.range.start.line + 1, 0 })
  -- Several lenses on the line: codelens.run asks which; answer "Run doctor".
  local select = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    for i, item in ipairs(items) do
      local title = opts and opts.format_item and opts.format_item(item) or tostring(item)
      if title == 'Run doctor' then return on_choice(item, i) end
    end
    return on_choice(nil, nil)
  end
  vim.lsp.codelens.run()
  vim.wait(timeout, function() return #vim.fn.getqflist() > 0 end, 50)
  vim.ui.select = select
  emit_quickfix('lens')
end

vim.fn.writefile(lines, out_path)
for _, client in pairs(vim.lsp.get_clients and vim.lsp.get_clients() or vim.lsp.get_active_clients()) do
  if vim.fn.has('nvim-0.10') == 1 then client:stop() else client.stop() end
end
vim.wait(300)
vim.cmd((got_diagnostics and got_lenses) and 'qa!' or 'cq!')
