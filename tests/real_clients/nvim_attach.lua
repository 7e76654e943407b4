-- Headless Neovim as a real client of `trainproof-lsp serve`.
--
--   TP_PYTHON=python TP_REPO=. TP_OUT=out.tsv TP_FILES=a.jsonl:b/trainer_state.json \
--     nvim --headless --clean -c 'luafile tests/real_clients/nvim_attach.lua'
--
-- Works on Debian's Neovim 0.7 (start_client + buf_attach_client, push diagnostics) and
-- on 0.11+/0.12 (vim.lsp.start, pull diagnostics). Opens every file, attaches the server,
-- waits until each buffer has diagnostics, then writes one line per diagnostic:
--   <file name> TAB <1-based line> TAB <code> TAB <severity> TAB <message>
-- and one "#hover" line per buffer (below)
-- and quits (exit code 0 when every buffer got diagnostics, 1 otherwise).
local python = os.getenv('TP_PYTHON') or 'python3'
local repo = os.getenv('TP_REPO') or '.'
local out_path = os.getenv('TP_OUT') or 'nvim_diagnostics.tsv'
local files = vim.split(os.getenv('TP_FILES') or '', ':', { plain = true })
local timeout = tonumber(os.getenv('TP_TIMEOUT_MS') or '30000')

local cfg = {
  name = 'trainproof',
  cmd = { python, '-m', 'trainproof_lsp', 'serve' },
  cmd_cwd = repo,
  root_dir = vim.fn.fnamemodify(files[1], ':p:h'),
  settings = { trainproof = { debounceMs = 0 } },  -- the answer to workspace/configuration
}

local buffers = {}
local client_id
for _, file in ipairs(files) do
  vim.cmd('edit ' .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  table.insert(buffers, buf)
  if vim.lsp.start then                      -- Neovim >= 0.8
    client_id = vim.lsp.start(cfg, { bufnr = buf })
  else                                       -- Neovim 0.7 (Debian 12)
    client_id = client_id or vim.lsp.start_client(cfg)
    vim.lsp.buf_attach_client(buf, client_id)
  end
end

local function all_have_diagnostics()
  for _, buf in ipairs(buffers) do
    if #vim.diagnostic.get(buf) == 0 then return false end
  end
  return true
end

local ok = vim.wait(timeout, all_have_diagnostics, 50)
local v = vim.version()
local lines = { string.format('# nvim %d.%d.%d ok=%s', v.major, v.minor, v.patch, tostring(ok)) }
for _, buf in ipairs(buffers) do
  local name = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ':t')
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
    table.insert(lines, string.format('%s\t%d\t%s\t%d\t%s', name, d.lnum + 1, tostring(code), d.severity,
      (d.message:gsub('[\t\n]', ' '))))
  end
end
-- Hover on each buffer's first diagnostic, as the client receives it (Markdown source):
--   #hover TAB <file name> TAB <1-based line> TAB <the hover text, whitespace folded>
for _, buf in ipairs(buffers) do
  local d = vim.diagnostic.get(buf)[1]
  if d then
    local params = { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = d.lnum, character = d.col } }
    local answers = vim.lsp.buf_request_sync(buf, 'textDocument/hover', params, 10000) or {}
    for _, answer in pairs(answers) do
      local contents = answer.result and answer.result.contents
      if contents then
        local text = type(contents) == 'table' and (contents.value or vim.inspect(contents)) or tostring(contents)
        table.insert(lines, string.format('#hover\t%s\t%d\t%s', vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ':t'),
          d.lnum + 1, (text:gsub('%s+', ' '))))
      end
    end
  end
end
vim.fn.writefile(lines, out_path)
if client_id then vim.lsp.stop_client(client_id) end
vim.wait(300)
vim.cmd(ok and 'qa!' or 'cq!')
