-- The shared gate's transitions, one call of this script each (manor/admission/redis_gate.py).
--
-- Redis runs a script atomically, so every transition sees and leaves the gate whole;
-- every time is the server's (TIME), never a client's clock.
--
-- KEYS[1]  the gate's key prefix, "manor:gate:{NAME}:"
-- ARGV[1]  the transition: join, step, poll, claim, resize, pause, leave, status, reset
--
-- The gate's keys (after the prefix):
--   cfg          hash: size, rate, burst, lease_ms, hold_until (ms), claim_ms, vtime
--                (hold_until: nobody is admitted before it: a server's retry-after, or
--                the holders' return after the server lost its data)
--   seq          the global ticket counter: the order of a tenant's waiters
--   admissions   the admission counter: a grant's place among all the gate's grants
--                (one undone, its caller gone, keeps its place: unlike stats' admitted)
--   line:token   zset waiter id -> ticket: waiting for a token (only with a bucket)
--   line:slot:T  zset waiter id -> ticket: tenant T's waiters for a slot, in their order
--   since        hash waiter id -> "when it joined the line (ms)|its cost": the wait figures,
--                and the seconds it is expected to hold its slot (its predicted latency)
--   held         hash permit id -> "TENANT|admitted (ms)|cost": what a lease is charged
--   tenants      zset tenant -> when it was last seen (ms)
--   tenant:T     hash: weight, cap (0: none), finish (its virtual finish), owed (what its
--                ended calls held beyond their costs, over its weight: charged to its
--                finish when its next waiter comes), holding, ended (ms: when its last
--                call ended, or a process of it last joined: its claim runs from then)
--   backlog      zset tenant -> the start tag of its head: the tenants with waiters
--   used:T       hash ten-second bucket -> the session-ms its calls ended in it held
--
-- Tenants share the slots by start-time fair queuing on each call's cost, with a claim
-- on each tenant's share (the in-process gate's policy: manor/admission/gate.py and
-- lanes.py): the next slot goes to the tenant whose head starts first (at max(virtual
-- time, the tenant's finish)); its finish moves on by cost / weight, corrected by what
-- the call really held once its lease has ended, when the tenant's next waiter comes. A tenant at its cap is passed over; so is one
-- holding its share of the slots while other claiming tenants are short of theirs.
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
local CFG, SEQ, TOKLINE, SINCE = P .. 'cfg', P .. 'seq', P .. 'line:token', P .. 'since'
local ADMISSIONS = P .. 'admissions'
local LEASES, PROCS, BUCKET, STATS = P .. 'leases', P .. 'procs', P .. 'bucket', P .. 'stats'
local HELD, TENANTS, BACKLOG = P .. 'held', P .. 'tenants', P .. 'backlog'
-- A tenant's share "of the last minute" counts the calls that ended in the last six
-- ten-second buckets and this one, and the time held so far by the calls in flight.
local SHARE_WINDOW_MS, BUCKET_MS = 60000, 10000
local EPSILON = 1e-9
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
  local v = redis.call('HMGET', CFG, 'size', 'rate', 'burst', 'lease_ms', 'hold_until', 'claim_ms')
  if not v[1] then return nil end
  return {size = tonumber(v[1]), rate = tonumber(v[2]), burst = tonumber(v[3]), lease = tonumber(v[4]), hold = tonumber(v[5]) or 0,
          claim = tonumber(v[6]) or 0}
end

-- -- tenants ---------------------------------------------------------------------------

local function slot_line(tenant) return P .. 'line:slot:' .. tenant end
local function tenant_key(tenant) return P .. 'tenant:' .. tenant end
local function used_key(tenant) return P .. 'used:' .. tenant end

-- The tenant of process PID (its proc hash says; a process gone: its pid).
local tenant_cache = {}
local function tenant_of_pid(pid)
  local known = tenant_cache[pid]
  if known == nil then
    known = redis.call('HGET', P .. 'proc:' .. pid, 'tenant') or pid
    tenant_cache[pid] = known
  end
  return known
end

local function tenant_number(tenant, field, default)
  return tonumber(redis.call('HGET', tenant_key(tenant), field)) or default
end

local function vtime() return tonumber(redis.call('HGET', CFG, 'vtime')) or 0 end

-- A waiter of TENANT joins its line; a tenant with no waiter before joins the backlog at
-- max(virtual time, its finish): no credit saved up while it was away. What its ended
-- calls held beyond (or short of) their costs is charged first, as the in-process gate
-- charges a lane at its next tickets: to its finish, or to its head's start if it has
-- waiters in line. Charged as each call ends instead, a tenant always in line (calls
-- shorter than predicted) would move its head below the virtual time while the others
-- came and went, and take the slots ahead of them.
local function enqueue(tenant, id, ticket)
  local line = slot_line(tenant)
  local key = tenant_key(tenant)
  local v = redis.call('HMGET', key, 'finish', 'owed')
  local finish, owed = tonumber(v[1]) or 0, tonumber(v[2]) or 0
  local waiting = redis.call('ZCARD', line) > 0
  if owed ~= 0 then
    finish = finish + owed
    redis.call('HSET', key, 'finish', string.format('%.9f', finish), 'owed', '0')
    if waiting then redis.call('ZINCRBY', BACKLOG, string.format('%.9f', owed), tenant) end
  end
  if not waiting then
    redis.call('ZADD', BACKLOG, string.format('%.9f', math.max(vtime(), finish)), tenant)
  end
  redis.call('ZADD', line, ticket, id)
end

-- Take waiter ID out of TENANT's line (not served); an empty line leaves the backlog.
local function dequeue(tenant, id)
  local line = slot_line(tenant)
  if redis.call('ZREM', line, id) == 1 then
    if redis.call('ZCARD', line) == 0 then redis.call('ZREM', BACKLOG, tenant) end
    return true
  end
  return false
end

-- When waiter ID joined the line (ms) and its cost (s).
local function since_and_cost(id)
  local entry = redis.call('HGET', SINCE, id)
  if not entry then return now, 1 end
  local since, cost = string.match(entry, '^([^|]*)|(.*)$')
  return tonumber(since), tonumber(cost)
end

-- A lease ends (released, expired, given back): the tenant holds one fewer, and owes
-- what the call held beyond its cost (CHARGE false: it held nothing worth charging, its
-- cost is taken back), charged when its next waiter comes (enqueue).
local function ended(id, charge)
  local entry = redis.call('HGET', HELD, id)
  if not entry then return end
  redis.call('HDEL', HELD, id)
  local tenant, admitted, cost = string.match(entry, '^(.*)|([^|]*)|([^|]*)$')
  admitted, cost = tonumber(admitted), tonumber(cost)
  local key = tenant_key(tenant)
  local v = redis.call('HMGET', key, 'weight', 'owed', 'holding')
  local held = 0
  if charge then held = (now - admitted) / 1000 end
  local owed = (tonumber(v[2]) or 0) + (held - cost) / (tonumber(v[1]) or 1)
  redis.call('HSET', key, 'holding', (tonumber(v[3]) or 1) - 1, 'ended', ms(now), 'owed', string.format('%.9f', owed))
  if held > 0 then
    redis.call('HINCRBYFLOAT', used_key(tenant), math.floor(now / BUCKET_MS), ms(now - admitted))
  end
end

-- 0 when TENANT may take a free slot now; else when the claims keeping it out lapse by
-- themselves (-1: only when a call ends or a waiter comes). Every tenant that waits,
-- holds a slot, or saw a call end (or joined) within claim_ms claims its share of the slots (size x
-- its weight over the claiming tenants', or its cap if less); a tenant takes a slot
-- while it holds less than its share, beyond it only one no claim needs.
local function lends_to(c, tenant, in_flight)
  if c.claim <= 0 or redis.call('ZCARD', TENANTS) < 2 then return 0 end
  local claims, total = {}, 0
  for _, other in ipairs(redis.call('ZRANGE', TENANTS, 0, -1)) do
    local v = redis.call('HMGET', tenant_key(other), 'weight', 'cap', 'holding', 'ended')
    local holding = tonumber(v[3]) or 0
    local lapses = nil
    if other == tenant or holding > 0 or redis.call('ZSCORE', BACKLOG, other) then
      lapses = -1
    else
      local last = tonumber(v[4])
      if last and now - last < c.claim then lapses = last + c.claim end
    end
    if lapses then
      local w = tonumber(v[1]) or 1
      total = total + w
      table.insert(claims, {other, w, tonumber(v[2]) or 0, holding, lapses})
    end
  end
  if #claims < 2 then return 0 end
  local share = c.size / total
  local short, lapses_at = 0, -1
  for _, claim in ipairs(claims) do
    local other, w, cap, holding, lapses = claim[1], claim[2], claim[3], claim[4], claim[5]
    if other == tenant then
      if holding < share * w - EPSILON then return 0 end
    else
      local due = share * w
      if cap > 0 and cap < due then due = cap end
      if due - holding > 0 then
        short = short + due - holding
        if lapses >= 0 and (lapses_at < 0 or lapses < lapses_at) then lapses_at = lapses end
      end
    end
  end
  if c.size - in_flight - short >= 1 - EPSILON then return 0 end
  return lapses_at
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

-- Take every waiter of PID out of the lines (its token refunded).
local function purge_lines(c, pid, owned)
  for _, id in ipairs(redis.call('ZRANGE', TOKLINE, 0, -1)) do
    if owned(id) then
      redis.call('ZREM', TOKLINE, id)
      redis.call('HDEL', SINCE, id)
    end
  end
  local tenant = tenant_of_pid(pid)
  for _, id in ipairs(redis.call('ZRANGE', slot_line(tenant), 0, -1)) do
    if owned(id) then
      dequeue(tenant, id)
      redis.call('HDEL', SINCE, id)
      refund(c)
    end
  end
end

local function prefixed(pid)
  local head = pid .. ':'
  return function(id) return string.sub(id, 1, #head) == head end
end

-- Expired leases free their slots; dead processes leave the line.
local function reap(c)
  local expired = redis.call('ZRANGEBYSCORE', LEASES, '-inf', '(' .. ms(now))
  if #expired > 0 then
    redis.call('ZREMRANGEBYSCORE', LEASES, '-inf', '(' .. ms(now))
    redis.call('HINCRBY', STATS, 'expired', #expired)
    for _, id in ipairs(expired) do ended(id, true) end
  end
  for _, pid in ipairs(redis.call('ZRANGEBYSCORE', PROCS, '-inf', '(' .. ms(now))) do
    redis.call('ZREM', PROCS, pid)
    purge_lines(c, pid, prefixed(pid))
    redis.call('DEL', proc_key(pid), grants_key(pid))
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
        enqueue(tenant_of_pid(pid_of(head[1])), head[1], head[2])
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
  local passed = {}
  local virtual = vtime()
  while in_flight < c.size do
    -- The tenant whose head starts first (ties: the lower name), passing over those at
    -- their cap and those a claim keeps out.
    local tenant, start, tenant_holding, tenant_weight = nil, nil, 0, 1
    local backlog = redis.call('ZRANGE', BACKLOG, 0, -1, 'WITHSCORES')
    for k = 1, #backlog, 2 do
      local candidate = backlog[k]
      if not passed[candidate] then
        local v = redis.call('HMGET', tenant_key(candidate), 'cap', 'holding', 'weight')
        local cap, holding = tonumber(v[1]) or 0, tonumber(v[2]) or 0
        if cap > 0 and holding >= cap then
          passed[candidate] = true
        else
          local lapses = 0
          if #backlog > 2 or c.claim > 0 then lapses = lends_to(c, candidate, in_flight) end
          if lapses == 0 then
            tenant, start, tenant_holding, tenant_weight = candidate, tonumber(backlog[k + 1]), holding, tonumber(v[3]) or 1
            break
          end
          passed[candidate] = true
          if lapses > 0 and (wake < 0 or lapses < wake) then wake = lapses end
        end
      end
    end
    if not tenant then break end
    local line = slot_line(tenant)
    local head = redis.call('ZRANGE', line, 0, 0, 'WITHSCORES')
    local id, ticket = head[1], head[2]
    local pid = pid_of(id)
    local since, cost = since_and_cost(id)
    redis.call('ZREM', line, id)
    redis.call('HDEL', SINCE, id)
    if alive(pid) then
      -- Served: the virtual time moves to its start, the tenant's finish past its cost.
      local finish = start + cost / tenant_weight
      redis.call('HSET', tenant_key(tenant), 'finish', string.format('%.9f', finish), 'holding', tenant_holding + 1)
      if start > virtual then virtual = start end
      if redis.call('ZCARD', line) > 0 then
        redis.call('ZADD', BACKLOG, string.format('%.9f', finish), tenant)
      else
        redis.call('ZREM', BACKLOG, tenant)
      end
      redis.call('HSET', HELD, id, tenant .. '|' .. ms(now) .. '|' .. cost)
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
      if redis.call('ZCARD', line) == 0 then redis.call('ZREM', BACKLOG, tenant) end
      refund(c)
    end
  end
  if virtual > vtime() then redis.call('HSET', CFG, 'vtime', string.format('%.9f', virtual)) end
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

local function waiting_for_slots()
  local n = 0
  for _, tenant in ipairs(redis.call('ZRANGE', BACKLOG, 0, -1)) do n = n + redis.call('ZCARD', slot_line(tenant)) end
  return n
end

-- What every transition answers: the gate's figures, when to look again, the grants.
local function reply(c, wake, grants, extra)
  local s = redis.call('HMGET', STATS, 'admitted', 'timeouts', 'cancelled', 'refunds', 'expired', 'peak', 'wait_ms', 'max_wait_ms')
  local tokens = -1
  if c.rate > 0 then tokens = bucket(c) end
  local figures = {
    tostring(c.size), tostring(c.rate), tostring(c.burst), tostring(c.lease),
    tostring(redis.call('ZCARD', LEASES)),
    tostring(redis.call('ZCARD', TOKLINE) + waiting_for_slots()),
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
    elseif dequeue(tenant_of_pid(pid_of(id)), id) then
      redis.call('HDEL', SINCE, id)
      refund(c)
      left = left + 1
    elseif redis.call('ZREM', LEASES, id) == 1 then
      ended(id, false)
      refund(c)
      redis.call('HINCRBY', STATS, 'admitted', -1)
      left = left + 1
    end
  end
  if left > 0 then redis.call('HINCRBY', STATS, counter, left) end
end

-- Whether TENANT is in use by another process than PID: one alive of that tenant, or
-- calls it holds or has waiting.
local function tenant_in_use(tenant, pid)
  if tenant_number(tenant, 'holding', 0) > 0 or redis.call('ZSCORE', BACKLOG, tenant) then return true end
  for _, other in ipairs(redis.call('ZRANGEBYSCORE', PROCS, '(' .. ms(now), '+inf')) do
    if other ~= pid and redis.call('HGET', proc_key(other), 'tenant') == tenant then return true end
  end
  return false
end

-- A process of TENANT joins, or starts its calls: the tenant claims its share from now,
-- as if a call of its had just ended. Its first waiters come a moment later, and a
-- tenant that reaches the server first in that moment must not take the slots they
-- need (a claim that no call follows lapses after claim_ms).
local function claim_from_now(tenant)
  redis.call('HSET', tenant_key(tenant), 'ended', ms(now))
end

-- Process PID is tenant TENANT. The process that brings the tenant in sets its WEIGHT and
-- CAP (0: none); while it is in use (tenant_in_use) they stay, whatever a process that
-- joins it says. The tenant claims its share from the join. Returns the tenant's weight
-- and cap as they are.
local function register_tenant(pid, tenant, weight, cap)
  redis.call('HSET', proc_key(pid), 'tenant', tenant)
  tenant_cache[pid] = tenant
  local key = tenant_key(tenant)
  if not tenant_in_use(tenant, pid) then redis.call('HSET', key, 'weight', weight, 'cap', cap) end
  redis.call('HSETNX', key, 'holding', 0)
  claim_from_now(tenant)
  redis.call('ZADD', TENANTS, ms(now), tenant)
  return redis.call('HMGET', key, 'weight', 'cap')
end

-- Tenants no process has used for ten leases, holding nothing, are forgotten.
local function forget_tenants(c)
  for _, tenant in ipairs(redis.call('ZRANGEBYSCORE', TENANTS, '-inf', '(' .. ms(now - 10 * c.lease))) do
    if tenant_number(tenant, 'holding', 0) <= 0 and not redis.call('ZSCORE', BACKLOG, tenant) then
      redis.call('ZREM', TENANTS, tenant)
      redis.call('DEL', tenant_key(tenant), used_key(tenant))
    end
  end
end

if op == 'join' then
  -- pid host ospid world size rate burst lease_ms claim_ms tenant weight cap rejoin held...
  local pid, rejoin = ARGV[2], ARGV[14] == '1'
  local c = config()
  local created = 0
  if not c then
    -- A gate found gone on a rejoin means the server lost its data while calls ran:
    -- admit nobody for one lease, so that every holder can register its permits again.
    local hold = 0
    if rejoin then hold = now + tonumber(ARGV[9]) end
    redis.call('HSET', CFG, 'size', ARGV[6], 'rate', ARGV[7], 'burst', ARGV[8], 'lease_ms', ARGV[9], 'hold_until', ms(hold),
               'claim_ms', ARGV[10], 'vtime', '0')
    c = config()
    created = 1
  end
  -- The other processes alive: none, and the gate is one an earlier run left.
  local others = redis.call('ZCOUNT', PROCS, '(' .. ms(now), '+inf')
  local mine = redis.call('ZSCORE', PROCS, pid)
  if mine and tonumber(mine) > now then others = others - 1 end
  if others == 0 and created == 0 then
    -- A gate nobody is on takes the lease and the claim of the process that comes to
    -- it (its size, rate and burst it keeps: 'manor gate resize' sets the size).
    redis.call('HSET', CFG, 'lease_ms', ARGV[9], 'claim_ms', ARGV[10])
    c.lease, c.claim = tonumber(ARGV[9]), tonumber(ARGV[10])
  end
  redis.call('ZADD', PROCS, now + c.lease, pid)
  redis.call('HSET', proc_key(pid), 'host', ARGV[3], 'pid', ARGV[4], 'world', ARGV[5], 'started', ms(now))
  redis.call('PEXPIRE', proc_key(pid), math.ceil(c.lease * 10))
  local tenant = register_tenant(pid, ARGV[11], ARGV[12], ARGV[13])
  forget_tenants(c)
  if rejoin then
    -- Whatever of ours the gate holds from before is stale: our waiters failed when
    -- the server was lost, and we say which permits we still hold.
    purge_lines(c, pid, prefixed(pid))
    redis.call('DEL', grants_key(pid))
    local held = {}
    for k = 15, #ARGV do held[ARGV[k]] = true end
    local ours = prefixed(pid)
    for _, id in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do
      if ours(id) and not held[id] then
        redis.call('ZREM', LEASES, id)
        ended(id, true)
      end
    end
    for id, _ in pairs(held) do
      -- A lease that expired meanwhile is not brought back (its slot may have been
      -- given to another), unless the gate is waiting for its holders to come back.
      if now < c.hold then redis.call('ZADD', LEASES, now + c.lease, id)
      else redis.call('ZADD', LEASES, 'XX', now + c.lease, id) end
    end
  end
  local grants, wake = dispatch(c, pid, '')
  -- What this process shares as it is: the gate's claim (its creator's), its tenant's
  -- weight and cap (whoever brought the tenant in).
  return reply(c, wake, grants, {tostring(created), tostring(others), tostring(c.claim), tenant[1], tenant[2]})

elseif op == 'step' then
  -- pid cause #released released... #timed_out ... #cancelled ... enqueued...
  local c = existing_config()
  if c.err then return c end
  local pid, cause = ARGV[2], ARGV[3]
  local err = heartbeat(c, pid)
  if err then return err end
  local released, i = counted(4)
  for _, id in ipairs(released) do
    if redis.call('ZREM', LEASES, id) == 1 then ended(id, true) end
  end
  local timed_out, cancelled
  timed_out, i = counted(i)
  cancelled, i = counted(i)
  give_up(c, timed_out, 'timeouts')
  give_up(c, cancelled, 'cancelled')
  -- Arrivals: id, cost, id, cost, ...
  local tenant = tenant_of_pid(pid)
  for k = i, #ARGV - 1, 2 do
    local id, cost = ARGV[k], ARGV[k + 1]
    if redis.call('HEXISTS', SINCE, id) == 0 and not redis.call('ZSCORE', LEASES, id) then
      local ticket = redis.call('INCR', SEQ)
      if c.rate > 0 then
        redis.call('ZADD', TOKLINE, ticket, id)
      else
        enqueue(tenant, id, ticket)
      end
      redis.call('HSET', SINCE, id, ms(now) .. '|' .. cost)
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
  redis.call('ZADD', TENANTS, ms(now), tenant_of_pid(pid))
  forget_tenants(c)
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

elseif op == 'claim' then
  -- tenant...: these tenants start their calls now, long after their processes joined
  -- (the parts of a fleet over processes, before their parent's word to start): each
  -- claims its share from now, as at a join
  local c = existing_config()
  if c.err then return c end
  for k = 2, #ARGV do
    if redis.call('ZSCORE', TENANTS, ARGV[k]) then claim_from_now(ARGV[k]) end
  end
  return reply(c, -1, {})

elseif op == 'resize' then
  -- size
  local c = existing_config()
  if c.err then return c end
  redis.call('HSET', CFG, 'size', ARGV[2])
  c.size = tonumber(ARGV[2])
  local _, wake = dispatch(c, '', '')
  return reply(c, wake, {})

elseif op == 'pause' then
  -- ms: admit nobody for this long from now, in any process (a server's retry-after);
  -- a hold that ends later stays as it is
  local c = existing_config()
  if c.err then return c end
  local hold = now + tonumber(ARGV[2])
  if hold > c.hold then
    redis.call('HSET', CFG, 'hold_until', ms(hold))
    c.hold = hold
  end
  local _, wake = dispatch(c, '', '')
  return reply(c, wake, {})

elseif op == 'leave' then
  -- pid: a process that stops gives everything back
  local c = config()
  if not c then return {} end
  local pid = ARGV[2]
  local ours = prefixed(pid)
  purge_lines(c, pid, ours)
  for _, id in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do
    if ours(id) then
      redis.call('ZREM', LEASES, id)
      ended(id, true)
    end
  end
  redis.call('ZREM', PROCS, pid)
  redis.call('DEL', proc_key(pid), grants_key(pid))
  local _, wake = dispatch(c, '', '')
  return reply(c, wake, {})

elseif op == 'reset' then
  -- Delete the gate, every key of it, while no process is on it and no permit is held:
  -- the next process to come makes it again with its own size, rate, burst, lease and
  -- claim. {} if there is no gate; {'busy', processes, permits} if it is in use;
  -- {'reset', keys deleted} when done.
  local c = config()
  if not c then return {} end
  reap(c)
  local procs, leases = redis.call('ZCARD', PROCS), redis.call('ZCARD', LEASES)
  if procs > 0 or leases > 0 then return {'busy', tostring(procs), tostring(leases)} end
  local keys = redis.call('KEYS', string.gsub(P, '([%*%?%[%]\\])', '\\%1') .. '*')
  for first = 1, #keys, 1000 do
    redis.call('DEL', unpack(keys, first, math.min(#keys, first + 999)))
  end
  return {'reset', tostring(#keys)}

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
  local lines = {TOKLINE}
  for _, tenant in ipairs(redis.call('ZRANGE', BACKLOG, 0, -1)) do table.insert(lines, slot_line(tenant)) end
  for _, line in ipairs(lines) do
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
  -- Every tenant: name weight cap holding waiting session-seconds of the last minute.
  local tenants, since = {}, now - SHARE_WINDOW_MS
  local in_flight = {}
  local held = redis.call('HGETALL', HELD)
  for k = 1, #held, 2 do
    local tenant, admitted = string.match(held[k + 1], '^(.*)|([^|]*)|[^|]*$')
    in_flight[tenant] = (in_flight[tenant] or 0) + (now - math.max(tonumber(admitted), since))
  end
  for _, tenant in ipairs(redis.call('ZRANGE', TENANTS, 0, -1)) do
    local v = redis.call('HMGET', tenant_key(tenant), 'weight', 'cap', 'holding')
    local used = in_flight[tenant] or 0
    local buckets = redis.call('HGETALL', used_key(tenant))
    local first = math.floor(since / BUCKET_MS)
    for k = 1, #buckets, 2 do
      if tonumber(buckets[k]) >= first then used = used + tonumber(buckets[k + 1])
      else redis.call('HDEL', used_key(tenant), buckets[k]) end
    end
    table.insert(tenants, {tenant, v[1] or '1', v[2] or '0', v[3] or '0', tostring(redis.call('ZCARD', slot_line(tenant))), ms(used / 1000)})
  end
  return reply(c, wake, {}, {procs, tenants})
end

return redis.error_reply('ERR unknown gate transition ' .. tostring(op))
