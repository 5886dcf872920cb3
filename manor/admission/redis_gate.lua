-- The shared gate's transitions, one call of this script each (manor/admission/redis_gate.py).
--
-- Redis runs a script atomically, so every transition sees and leaves the gate whole;
-- every time is the server's (TIME), never a client's clock.
--
-- KEYS[1]  the gate's key prefix, "manor:gate:{NAME}:"
-- ARGV[1]  the transition: join, step, poll, resize, leave, status
--
-- The gate's keys (after the prefix):
--   cfg          hash: size, rate, burst, lease_ms, hold_until (ms)
--   seq          the global ticket counter: admission order across processes
--   admissions   the admission counter: a grant's place among all the gate's grants
--                (one undone, its caller gone, keeps its place: unlike stats' admitted)
--   line:token   zset waiter id -> ticket: waiting for a token (only with a bucket)
--   line:slot    zset waiter id -> ticket: waiting for a slot
--   since        hash waiter id -> when it joined the line (ms), for the wait figures
--   leases       zset permit id -> expiry (ms): the calls in flight
--   procs        zset process id -> heartbeat expiry (ms): the processes alive
--   proc:PID     hash: host, pid, world, started, of one process
--   grants:PID   list: the grants of PID's waiters made by another process's transition
--   bucket       hash: tokens, at (ms)
--   stats        hash: admitted, timeouts, cancelled, refunds, expired, peak, wait_ms, max_wait_ms
--
-- A waiter id is "PID:TICKET" (PID is hex, without ':'): a permit keeps its waiter's id.

local P = KEYS[1]
local op = ARGV[1]
local CFG, SEQ, TOKLINE, SLOTLINE, SINCE = P .. 'cfg', P .. 'seq', P .. 'line:token', P .. 'line:slot', P .. 'since'
local ADMISSIONS = P .. 'admissions'
local LEASES, PROCS, BUCKET, STATS = P .. 'leases', P .. 'procs', P .. 'bucket', P .. 'stats'
-- A list of grants nobody reads (its process died) goes away on its own.
local GRANTS_TTL_MS = 60000

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
-- Scores and fields as text with a fixed point: tostring() would round to 14 digits.
local function ms(t) return string.format('%.3f', t) end

local function proc_key(pid) return P .. 'proc:' .. pid end
local function grants_key(pid) return P .. 'grants:' .. pid end
local function pid_of(id) return string.match(id, '^[^:]+') end

local function config()
  local v = redis.call('HMGET', CFG, 'size', 'rate', 'burst', 'lease_ms', 'hold_until')
  if not v[1] then return nil end
  return {size = tonumber(v[1]), rate = tonumber(v[2]), burst = tonumber(v[3]), lease = tonumber(v[4]), hold = tonumber(v[5]) or 0}
end

local function existing_config()
  local c = config()
  if not c then return redis.error_reply('NOGATE the gate is gone (the server lost its data)') end
  return c
end

-- Is process PID alive (its heartbeat not expired)? Asked once per transition and PID.
local alive_cache = {}
local function alive(pid)
  local known = alive_cache[pid]
  if known == nil then
    local expiry = redis.call('ZSCORE', PROCS, pid)
    known = expiry ~= false and tonumber(expiry) >= now
    alive_cache[pid] = known
  end
  return known
end

local function bucket(c)
  local v = redis.call('HMGET', BUCKET, 'tokens', 'at')
  local tokens, at = tonumber(v[1]), tonumber(v[2])
  if tokens == nil then return c.burst end
  if now > at then tokens = math.min(c.burst, tokens + (now - at) * c.rate / 1000) end
  return tokens
end

local function set_bucket(tokens)
  redis.call('HSET', BUCKET, 'tokens', string.format('%.9f', tokens), 'at', ms(now))
end

-- A token given back (the wait after it failed): not capped at the burst; the next
-- refill caps it (as the in-process gate does).
local function refund(c)
  if c.rate > 0 then
    set_bucket(bucket(c) + 1)
    redis.call('HINCRBY', STATS, 'refunds', 1)
  end
end

-- Take every waiter for which owned(id) is true out of the lines (its token refunded).
local function purge_lines(c, owned)
  for _, line in ipairs({TOKLINE, SLOTLINE}) do
    for _, id in ipairs(redis.call('ZRANGE', line, 0, -1)) do
      if owned(id) then
        redis.call('ZREM', line, id)
        redis.call('HDEL', SINCE, id)
        if line == SLOTLINE then refund(c) end
      end
    end
  end
end

local function prefixed(pid)
  local head = pid .. ':'
  return function(id) return string.sub(id, 1, #head) == head end
end

-- Expired leases free their slots; dead processes leave the line.
local function reap(c)
  local expired = redis.call('ZREMRANGEBYSCORE', LEASES, '-inf', '(' .. ms(now))
  if expired > 0 then redis.call('HINCRBY', STATS, 'expired', expired) end
  for _, pid in ipairs(redis.call('ZRANGEBYSCORE', PROCS, '-inf', '(' .. ms(now))) do
    redis.call('ZREM', PROCS, pid)
    redis.call('DEL', proc_key(pid), grants_key(pid))
    purge_lines(c, prefixed(pid))
  end
end

local function push_all(key, values)
  for first = 1, #values, 1000 do
    redis.call('RPUSH', key, unpack(values, first, math.min(#values, first + 999)))
  end
end

-- Hand out tokens, then slots, strictly in ticket order, as far as they go. Grants of
-- CALLER's waiters are returned; the others are pushed to their processes' lists.
-- Returns the grants and when the gate should next be looked at (ms; -1: no need).
local function dispatch(c, caller, cause)
  reap(c)
  if now < c.hold then return {}, c.hold end
  local wake = -1
  if c.rate > 0 then
    local tokens = bucket(c)
    while true do
      local head = redis.call('ZRANGE', TOKLINE, 0, 0, 'WITHSCORES')
      if #head == 0 then break end
      if not alive(pid_of(head[1])) then
        redis.call('ZREM', TOKLINE, head[1])
        redis.call('HDEL', SINCE, head[1])
      elseif tokens >= 1 - 1e-9 then
        tokens = math.max(0, tokens - 1)
        redis.call('ZREM', TOKLINE, head[1])
        redis.call('ZADD', SLOTLINE, head[2], head[1])
      else
        wake = now + (1 - tokens) * 1000 / c.rate
        break
      end
    end
    set_bucket(tokens)
  end
  local in_flight = redis.call('ZCARD', LEASES)
  local grants = {}
  local expiry = now + c.lease
  while in_flight < c.size do
    local head = redis.call('ZRANGE', SLOTLINE, 0, 0, 'WITHSCORES')
    if #head == 0 then break end
    local id, ticket = head[1], head[2]
    local pid = pid_of(id)
    local since = tonumber(redis.call('HGET', SINCE, id)) or now
    redis.call('ZREM', SLOTLINE, id)
    redis.call('HDEL', SINCE, id)
    if alive(pid) then
      redis.call('ZADD', LEASES, expiry, id)
      in_flight = in_flight + 1
      redis.call('HINCRBY', STATS, 'admitted', 1)
      local order = redis.call('INCR', ADMISSIONS)
      local wait = now - since
      redis.call('HINCRBYFLOAT', STATS, 'wait_ms', wait)
      if wait > (tonumber(redis.call('HGET', STATS, 'max_wait_ms')) or 0) then
        redis.call('HSET', STATS, 'max_wait_ms', ms(wait))
      end
      grants[pid] = grants[pid] or {}
      table.insert(grants[pid], id .. '|' .. ticket .. '|' .. order .. '|' .. ms(now) .. '|' .. cause)
    else
      refund(c)
    end
  end
  if in_flight > (tonumber(redis.call('HGET', STATS, 'peak')) or 0) then
    redis.call('HSET', STATS, 'peak', in_flight)
  end
  for pid, list in pairs(grants) do
    if pid ~= caller then
      push_all(grants_key(pid), list)
      redis.call('PEXPIRE', grants_key(pid), GRANTS_TTL_MS)
    end
  end
  return grants[caller] or {}, wake
end

-- What every transition answers: the gate's figures, when to look again, the grants.
local function reply(c, wake, grants, extra)
  local s = redis.call('HMGET', STATS, 'admitted', 'timeouts', 'cancelled', 'refunds', 'expired', 'peak', 'wait_ms', 'max_wait_ms')
  local tokens = -1
  if c.rate > 0 then tokens = bucket(c) end
  local figures = {
    tostring(c.size), tostring(c.rate), tostring(c.burst), tostring(c.lease),
    tostring(redis.call('ZCARD', LEASES)),
    tostring(redis.call('ZCARD', TOKLINE) + redis.call('ZCARD', SLOTLINE)),
    tostring(tokens), ms(wake), ms(now),
  }
  for i = 1, 8 do table.insert(figures, s[i] or '0') end
  return {figures, grants, extra or {}}
end

-- Renew our heartbeat; an error if we were given up for dead (the caller joins again).
local function heartbeat(c, pid)
  local expiry = redis.call('ZSCORE', PROCS, pid)
  if not expiry or tonumber(expiry) < now then
    return redis.error_reply('NOPROC this process was given up for dead')
  end
  redis.call('ZADD', PROCS, now + c.lease, pid)
  redis.call('PEXPIRE', proc_key(pid), math.ceil(c.lease * 10))
end

-- Read ARGV from I: a count, then that many values. Returns them and the next index.
local function counted(i)
  local n = tonumber(ARGV[i])
  local values = {}
  for k = 1, n do values[k] = ARGV[i + k] end
  return values, i + n + 1
end

-- Waiters leave the line (timed out or cancelled); one already granted gives its slot
-- back at once (its caller is gone), with its token.
local function give_up(c, ids, counter)
  local left = 0
  for _, id in ipairs(ids) do
    if redis.call('ZREM', TOKLINE, id) == 1 then
      redis.call('HDEL', SINCE, id)
      left = left + 1
    elseif redis.call('ZREM', SLOTLINE, id) == 1 then
      redis.call('HDEL', SINCE, id)
      refund(c)
      left = left + 1
    elseif redis.call('ZREM', LEASES, id) == 1 then
      refund(c)
      redis.call('HINCRBY', STATS, 'admitted', -1)
      left = left + 1
    end
  end
  if left > 0 then redis.call('HINCRBY', STATS, counter, left) end
end

if op == 'join' then
  -- pid host ospid world size rate burst lease_ms rejoin held...
  local pid, rejoin = ARGV[2], ARGV[10] == '1'
  local c = config()
  local created = 0
  if not c then
    -- A gate found gone on a rejoin means the server lost its data while calls ran:
    -- admit nobody for one lease, so that every holder can register its permits again.
    local hold = 0
    if rejoin then hold = now + tonumber(ARGV[9]) end
    redis.call('HSET', CFG, 'size', ARGV[6], 'rate', ARGV[7], 'burst', ARGV[8], 'lease_ms', ARGV[9], 'hold_until', ms(hold))
    c = config()
    created = 1
  end
  -- The other processes alive: none, and the gate is one an earlier run left.
  local others = redis.call('ZCOUNT', PROCS, '(' .. ms(now), '+inf')
  local mine = redis.call('ZSCORE', PROCS, pid)
  if mine and tonumber(mine) > now then others = others - 1 end
  redis.call('ZADD', PROCS, now + c.lease, pid)
  redis.call('HSET', proc_key(pid), 'host', ARGV[3], 'pid', ARGV[4], 'world', ARGV[5], 'started', ms(now))
  redis.call('PEXPIRE', proc_key(pid), math.ceil(c.lease * 10))
  if rejoin then
    -- Whatever of ours the gate holds from before is stale: our waiters failed when
    -- the server was lost, and we say which permits we still hold.
    purge_lines(c, prefixed(pid))
    redis.call('DEL', grants_key(pid))
    local held = {}
    for k = 11, #ARGV do held[ARGV[k]] = true end
    local ours = prefixed(pid)
    for _, id in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do
      if ours(id) and not held[id] then redis.call('ZREM', LEASES, id) end
    end
    for id, _ in pairs(held) do
      -- A lease that expired meanwhile is not brought back (its slot may have been
      -- given to another), unless the gate is waiting for its holders to come back.
      if now < c.hold then redis.call('ZADD', LEASES, now + c.lease, id)
      else redis.call('ZADD', LEASES, 'XX', now + c.lease, id) end
    end
  end
  local grants, wake = dispatch(c, pid, '')
  return reply(c, wake, grants, {tostring(created), tostring(others)})

elseif op == 'step' then
  -- pid cause #released released... #timed_out ... #cancelled ... enqueued...
  local c = existing_config()
  if c.err then return c end
  local pid, cause = ARGV[2], ARGV[3]
  local err = heartbeat(c, pid)
  if err then return err end
  local released, i = counted(4)
  for _, id in ipairs(released) do redis.call('ZREM', LEASES, id) end
  local timed_out, cancelled
  timed_out, i = counted(i)
  cancelled, i = counted(i)
  give_up(c, timed_out, 'timeouts')
  give_up(c, cancelled, 'cancelled')
  local line = SLOTLINE
  if c.rate > 0 then line = TOKLINE end
  for k = i, #ARGV do
    local id = ARGV[k]
    if not redis.call('ZSCORE', line, id) and not redis.call('ZSCORE', LEASES, id) then
      redis.call('ZADD', line, redis.call('INCR', SEQ), id)
      redis.call('HSET', SINCE, id, ms(now))
    end
  end
  local grants, wake = dispatch(c, pid, cause)
  return reply(c, wake, grants)

elseif op == 'poll' then
  -- pid #held held... waiting...: renew the heartbeat and the leases still held; say
  -- which leases were lost and which waiters were granted (a grant whose message was lost).
  local c = existing_config()
  if c.err then return c end
  local pid = ARGV[2]
  local err = heartbeat(c, pid)
  if err then return err end
  local held, i = counted(3)
  local lost = {}
  for _, id in ipairs(held) do
    if redis.call('ZSCORE', LEASES, id) then redis.call('ZADD', LEASES, 'XX', now + c.lease, id)
    else table.insert(lost, id) end
  end
  local grants, wake = dispatch(c, pid, '')
  local claimed = {}
  for k = i, #ARGV do
    if redis.call('ZSCORE', LEASES, ARGV[k]) then table.insert(claimed, ARGV[k]) end
  end
  return reply(c, wake, grants, {lost, claimed})

elseif op == 'resize' then
  -- size
  local c = existing_config()
  if c.err then return c end
  redis.call('HSET', CFG, 'size', ARGV[2])
  c.size = tonumber(ARGV[2])
  local _, wake = dispatch(c, '', '')
  return reply(c, wake, {})

elseif op == 'leave' then
  -- pid: a process that stops gives everything back
  local c = config()
  if not c then return {} end
  local pid = ARGV[2]
  local ours = prefixed(pid)
  purge_lines(c, ours)
  for _, id in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do
    if ours(id) then redis.call('ZREM', LEASES, id) end
  end
  redis.call('ZREM', PROCS, pid)
  redis.call('DEL', proc_key(pid), grants_key(pid))
  local _, wake = dispatch(c, '', '')
  return reply(c, wake, {})

elseif op == 'status' then
  -- The gate's figures and every live process: pid host ospid world holding waiting.
  local c = config()
  if not c then return {} end
  local _, wake = dispatch(c, '', '')
  local holding, waiting = {}, {}
  for _, id in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do
    local pid = pid_of(id)
    holding[pid] = (holding[pid] or 0) + 1
  end
  for _, line in ipairs({TOKLINE, SLOTLINE}) do
    for _, id in ipairs(redis.call('ZRANGE', line, 0, -1)) do
      local pid = pid_of(id)
      waiting[pid] = (waiting[pid] or 0) + 1
    end
  end
  local procs = {}
  for _, pid in ipairs(redis.call('ZRANGE', PROCS, 0, -1)) do
    local v = redis.call('HMGET', proc_key(pid), 'host', 'pid', 'world')
    table.insert(procs, {pid, v[1] or '?', v[2] or '?', v[3] or '', tostring(holding[pid] or 0), tostring(waiting[pid] or 0)})
    holding[pid] = nil
  end
  -- Permits of processes that have died, until their leases expire.
  for pid, n in pairs(holding) do
    table.insert(procs, {pid, '?', '?', '(gone)', tostring(n), '0'})
  end
  return reply(c, wake, {}, procs)
end

return redis.error_reply('ERR unknown gate transition ' .. tostring(op))
