--[[
slurmsched job_submit.lua: gives a new job its SiteFactor at submit time.

The slurmsched daemon writes a small cache file (see docs/admin-guide.md) that maps
"user<TAB>job name" to a predicted run time (names as accounting stores them: a '"'
becomes '`'), plus the table that turns predicted GPU-seconds into a SiteFactor. This
script looks the new job up, computes the same SiteFactor the daemon would set in its
next cycle (the estimate capped at the job's time limit: its -t, else its partition's
DefaultTime or MaxTime, as Slurm will set it; -t UNLIMITED or 0 caps nothing), and stamps
AdminComment. Jobs in the
partitions and QOS the daemon protects (listed in the cache) are left alone, as the
daemon leaves them; so is a job that names no QOS while some QOS is protected (its
default QOS is its association's, not visible here), and one that names no partition
while the default partition (flagged in the part_list slurmctld passes) is protected.
A held job (-H) and one whose --begin is ahead are left alone too: sprio does not list
them, so neither the daemon nor `slurmsched revert` could read their value back; the
daemon values them once sprio lists them.

Cache location: "slurmsched-submit.cache" in this script's own directory (normally
beside slurm.conf); make it a symlink to the daemon's file (daemon.submit_cache).

Fail-open: a missing, stale (older than its own max_age, or stamped over max_age ahead),
unreadable or malformed cache, an unknown job, or any error here leaves the job untouched
and returns slurm.SUCCESS. Runs inside slurmctld on every submission: keep it tiny.
--]]

local CACHE_NAME = "slurmsched-submit.cache"
local MAGIC = "slurmsched-submit-cache 1"
local NO_VAL = 4294967294
local INFINITE = 4294967295

local function script_dir()
	local src = debug.getinfo(1, "S").source or ""
	if src:sub(1, 1) == "@" then
		return src:sub(2):match("^(.*)/[^/]*$") or "."
	end
	local conf = os.getenv("SLURM_CONF")
	return conf and conf:match("^(.*)/[^/]*$") or "/etc/slurm"
end

local CACHE_PATH = script_dir() .. "/" .. CACHE_NAME
local parsed = nil -- last parsed cache, reused while its "written" stamp and size are unchanged

local function set(v)
	return v ~= nil and v ~= 0 and v < NO_VAL
end

local function load_cache()
	local f = io.open(CACHE_PATH, "r")
	if not f then return nil end
	local size = f:seek("end")
	f:seek("set")
	local written = tonumber(((f:read("*l") == MAGIC) and f:read("*l") or ""):match("^written (%d+)$"))
	local max_age = tonumber((f:read("*l") or ""):match("^max_age (%d+)$"))
	-- stale: written over max_age ago, or stamped over max_age ahead (by a clock since
	-- stepped back, or a writer whose clock runs ahead: it would never go stale)
	if not written or not max_age or math.abs(os.time() - written) > max_age then
		f:close()
		return nil
	end
	if parsed and parsed.written == written and parsed.size == size then
		f:close()
		return parsed
	end
	local c = { written = written, size = size, cpu_weight = 0, levels = {}, jobs = {},
		protect = { partition = {}, qos = {} } }
	for line in f:lines() do
		local est, key = line:match("^job (%d+)\t(.*)$")
		if est then
			c.jobs[key] = tonumber(est)
		else
			local bound, value = line:match("^level (%d+) (%-?%d+)$")
			local kind, name = line:match("^protect (%a+) (%S+)$")
			if bound then
				c.levels[#c.levels + 1] = { tonumber(bound), tonumber(value) }
			elseif kind and c.protect[kind] then
				c.protect[kind][name] = true
			else
				c.cpu_weight = tonumber(line:match("^cpu_weight (%S+)$")) or c.cpu_weight
			end
		end
	end
	f:close()
	parsed = c
	return c
end

local function gpu_count(tres)
	local n = 0
	for tok in (tres or ""):gmatch("[^,]+") do
		if tok:find("gpu", 1, true) then
			n = n + (tonumber(tok:match("[:=](%d+)$")) or 1)
		end
	end
	return n
end

-- whether `value` (a comma list; nil or "": the job names none, then `default`) hits `list`
local function listed(list, value, default)
	if next(list) == nil then return false end
	if value == nil or value == "" then
		return default == nil or list[default] == true
	end
	for name in value:gmatch("[^,]+") do
		if list[name] then return true end
	end
	return false
end

-- The partition slurmctld flags as default, from part_list (keyed by name; the partitions
-- this user may use): its name and record, or nil when part_list holds none.
local function default_partition(part_list)
	if type(part_list) ~= "table" then return nil end
	for key, p in pairs(part_list) do
		local default = p.flag_default
		if default == true or (type(default) == "number" and default ~= 0) then
			return p.name or key, p
		end
	end
	return nil
end

-- The limit (minutes) Slurm gives a job submitted without -t: its partition's DefaultTime,
-- else its MaxTime (of a job naming several partitions, the first one's, as slurmctld
-- sets it at submission; of a job naming none, `default_part`'s, the default partition's
-- record); nil when neither is set (INFINITE) or the partition is not in part_list (a
-- name this user cannot use).
local function partition_limit(job_desc, part_list, default_part)
	local name, part = job_desc.partition, default_part
	if name ~= nil and name ~= "" then
		part = type(part_list) == "table" and part_list[name:match("^[^,]*")] or nil
	end
	if part == nil then return nil end
	if set(part.default_time) then return part.default_time end
	if set(part.max_time) then return part.max_time end
	return nil
end

local function site_factor(job_desc, part_list)
	if job_desc.priority == 0 or (set(job_desc.begin_time) and job_desc.begin_time > os.time()) then
		return nil
	end
	local c = load_cache()
	if not c then return nil end
	local default_name, default_part = default_partition(part_list)
	if listed(c.protect.partition, job_desc.partition, default_name or "")
		or listed(c.protect.qos, job_desc.qos, nil) then
		return nil
	end
	-- accounting stores '"' in a job name as '`' (slurmdbd), and so does the cache
	local name = (job_desc.name or ""):gsub('"', "`")
	local est = c.jobs[(job_desc.user_name or "") .. "\t" .. name]
	if not est then return nil end
	-- capped at the time limit, as the daemon caps it (squeue shows the partition's default);
	-- -t UNLIMITED or -t 0 is no limit, whatever the partition's, and caps nothing
	local limit = job_desc.time_limit
	if limit == INFINITE or limit == 0 then
		limit = nil
	elseif not set(limit) then
		limit = partition_limit(job_desc, part_list, default_part)
	end
	if limit then
		est = math.min(est, limit * 60)
	end
	local nodes = set(job_desc.min_nodes) and job_desc.min_nodes or 1
	local gpus = gpu_count(job_desc.tres_per_job)
	if gpus == 0 then gpus = gpu_count(job_desc.tres_per_node) * nodes end
	if gpus == 0 then
		-- --gpus-per-task: per task, times the tasks (-n; at least one per node)
		local tasks = set(job_desc.num_tasks) and job_desc.num_tasks or nodes
		gpus = gpu_count(job_desc.tres_per_task) * tasks
	end
	local service
	if gpus > 0 then
		service = est * gpus
	else
		service = est * (set(job_desc.min_cpus) and job_desc.min_cpus or 1) * c.cpu_weight
	end
	for _, level in ipairs(c.levels) do
		if service <= level[1] then return level[2] end
	end
	return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local ok, value = pcall(site_factor, job_desc, part_list)
	if not ok then
		slurm.log_info("slurmsched: job_submit.lua left job untouched: %s", tostring(value))
	elseif value then
		job_desc.site_factor = value
		if job_desc.admin_comment == nil or job_desc.admin_comment == "" then
			job_desc.admin_comment = "slurmsched:site_factor=" .. value
		end
	end
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end

slurm.log_info("slurmsched: job_submit.lua reads %s", CACHE_PATH)
return slurm.SUCCESS
