// relax-agentic inspect: the page (docs/inspect.md). Plain JavaScript, no dependencies, nothing fetched beyond
// the inspector's own /api (served mode) or the JSON script elements of this file (a shared --html file).
"use strict"
;(() => {
  const ROW = 24
  const $ = (id) => document.getElementById(id)
  const esc = (s) =>
    String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;" })[c])
  const fmt = (x, d = 3) => (x === null || x === undefined ? "–" : Number.isInteger(x) ? String(x) : x.toFixed(d))

  // ---- data source: the server's /api, or the JSON embedded by --html ----
  const embedded = $("inspect-overview")
  const source = (() => {
    if (embedded !== null) {
      const elements = new Map()
      for (const el of document.querySelectorAll("script.inspect-session")) elements.set(el.dataset.key, el)
      const parsed = new Map()
      const session = (key) => {
        if (!parsed.has(key)) parsed.set(key, JSON.parse(elements.get(key).textContent))
        return parsed.get(key)
      }
      let texts = null
      return {
        overview: async () => JSON.parse(embedded.textContent),
        timeline: async () => JSON.parse($("inspect-timeline").textContent),
        session: async (key) => session(key),
        search: async (q) => {
          const query = q.toLowerCase()
          if (texts === null) {
            texts = new Map()
            for (const key of elements.keys()) {
              texts.set(key, session(key).samples.map((s) => s.text.join("")).join("\n").toLowerCase())
              parsed.delete(key)
            }
          }
          return [...texts.entries()].filter(([k, t]) => k.toLowerCase().includes(query) || t.includes(query)).map((
            [k]
          ) => k)
        }
      }
    }
    const get = async (path) => {
      const response = await fetch(path)
      if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`)
      return response.json()
    }
    return {
      overview: () => get("api/overview"),
      timeline: () => get("api/timeline"),
      session: (key) => get(`api/session?key=${encodeURIComponent(key)}`),
      search: async (q) => (await get(`api/search?q=${encodeURIComponent(q)}`)).keys
    }
  })()

  // ---- state ----
  let overview = null
  let step = null // null: every step
  let searchKeys = null // null: no search
  let rows = [] // what the list shows: {group} or {session}
  let selected = null
  const groupsByKey = new Map()

  const filters = () => ({
    status: $("filter-status").value,
    exportName: $("filter-export").value,
    min: $("filter-reward-min").value === "" ? null : Number($("filter-reward-min").value),
    max: $("filter-reward-max").value === "" ? null : Number($("filter-reward-max").value),
    parser: $("filter-parser").checked,
    aborted: $("filter-aborted").checked,
    drift: $("filter-drift").checked,
    sort: $("sort").value,
    desc: $("sort-desc").checked,
    grouped: $("grouped").checked
  })

  const passes = (s, f) => {
    if (step !== null && s.step !== step) return false
    if (searchKeys !== null && !searchKeys.has(s.key)) return false
    if (f.status !== "" && s.status !== f.status) return false
    if (f.exportName !== "" && !s.exports.some((e) => (e === null ? "(implicit)" : e) === f.exportName)) return false
    if (f.min !== null && (s.reward === null || s.reward < f.min)) return false
    if (f.max !== null && (s.reward === null || s.reward > f.max)) return false
    if (f.parser && s.parser_failures === 0) return false
    if (f.aborted && s.aborts === 0) return false
    if (f.drift && s.drift === 0) return false
    return true
  }

  const compare = (f) => (a, b) => {
    const key = f.sort
    const va = a[key] ?? -Infinity
    const vb = b[key] ?? -Infinity
    const d = key === "index" ? 0 : va < vb ? -1 : va > vb ? 1 : 0
    const base = d !== 0 ? d : a.step === b.step ? a.index - b.index : 0
    return f.desc ? -base : base
  }

  const rebuild = () => {
    const f = filters()
    const shown = overview.sessions.filter((s) => passes(s, f)).sort(compare(f))
    rows = []
    if (f.grouped) {
      const byGroup = new Map()
      for (const s of shown) {
        const key = `${s.step}\u0000${s.group}`
        if (!byGroup.has(key)) byGroup.set(key, [])
        byGroup.get(key).push(s)
      }
      for (const [key, members] of byGroup) {
        rows.push({ group: groupsByKey.get(key), shown: members.length })
        for (const s of members) rows.push({ session: s })
      }
    } else {
      for (const s of shown) rows.push({ session: s })
    }
    $("shown-count").textContent = String(shown.length)
    $("list-inner").style.height = `${rows.length * ROW}px`
    lastRange = ""
    renderList()
  }

  const sessionRow = (s) =>
    `<span class="c-idx">${esc(s.step)}·${s.index}</span><span class="c-id" title="${esc(s.session_id)}">${
      esc(s.session_id.slice(0, 12))
    }</span>` +
    `<span class="c-exp">${esc(s.exports.map((e) => (e === null ? "(implicit)" : e)).join(","))}</span>` +
    `<span class="c-num">${fmt(s.reward)}</span><span class="c-num">${fmt(s.advantage)}</span>` +
    `<span class="c-st${s.status === "completed" ? "" : " warn"}">${s.status}</span>` +
    `<span class="c-sm">${s.turns}</span><span class="c-sm${s.aborts > 0 ? " warn" : ""}">${s.aborts}</span>` +
    `<span class="c-wv" title="${esc(s.weight_versions.join(", "))}">${esc(s.weight_versions.join(","))}</span>` +
    `<span class="c-sm${s.parser_failures > 0 ? " bad" : ""}">${s.parser_failures}</span>` +
    `<span class="c-num">${fmt(s.wall_s, 2)}</span><span class="c-num">${fmt(s.generation_s, 2)}</span>` +
    `<span class="c-sm${s.drift > 0 ? " bad" : ""}">${s.drift}</span>`

  const groupRow = (g, shownCount) =>
    `<span>step ${esc(g.step)} · Group ${g.group} · ${shownCount}/${g.sessions} Sessions · reward mean ${
      fmt(g.reward_mean)
    } ` +
    `std ${fmt(g.reward_std)}${g.zero_advantage ? " · <span class=\"warn\">all advantages 0</span>" : ""}</span>`

  // Only the rows in view (plus a margin) exist in the DOM: the list scrolls 10,000 Sessions like 10.
  let lastRange = ""
  const renderList = () => {
    const list = $("list")
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 10)
    const last = Math.min(rows.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW) + 10)
    const range = `${first}:${last}`
    if (range === lastRange) return
    lastRange = range
    const html = []
    for (let i = first; i < last; i++) {
      const r = rows[i]
      const top = `style="top:${i * ROW}px"`
      if (r.group !== undefined) html.push(`<div class="row group" ${top}>${groupRow(r.group, r.shown)}</div>`)
      else {
        const on = selected !== null && selected.row.key === r.session.key ? " on" : ""
        html.push(
          `<div class="row session${on}" ${top} data-key="${esc(r.session.key)}">${sessionRow(r.session)}</div>`
        )
      }
    }
    $("list-inner").innerHTML = html.join("")
  }

  const renderSteps = () => {
    const buttons = [
      `<button data-step="" class="${
        step === null ? "on" : ""
      }">All steps<small>${overview.sessions.length} Sessions</small></button>`
    ]
    for (const s of overview.steps) {
      buttons.push(
        `<button data-step="${esc(s.step)}" class="${step === s.step ? "on" : ""}">${s.eval ? "Eval " : "step "}${
          esc(s.step)
        }` +
          `<small>${s.groups} Groups · ${s.sessions} Sessions · reward ${fmt(s.reward_mean)}</small></button>`
      )
    }
    $("steps").innerHTML = buttons.join("")
  }

  // ---- a Session ----
  const exportLabel = (e) => (e === null ? "(implicit)" : e)

  const messageHtml = (m) => {
    const content = typeof m.content === "string" ? m.content : JSON.stringify(m.content, null, 1)
    let out = `<div class="msg"><span class="role">${esc(m.role)}</span>${
      m.tool_call_id ? `<small>${esc(m.tool_call_id)}</small>` : ""
    }`
    if (m.reasoning_content !== undefined) out += `<pre class="reasoning">[reasoning] ${esc(m.reasoning_content)}</pre>`
    out += `<pre>${esc(content)}</pre>`
    for (const c of m.tool_calls ?? []) {
      out += `<pre>[tool call ${esc(c.function.name ?? "?")}] ${esc(c.function.arguments)}</pre>`
    }
    return `${out}</div>`
  }

  const nodeLabel = (n) => {
    const m = n.messages[0]
    if (m === undefined) return n.parent === null ? "(root)" : ""
    const text = typeof m.content === "string" ? m.content : JSON.stringify(m.content)
    return `${m.role}${n.messages.length > 1 ? ` +${n.messages.length - 1}` : ""}: ${
      text.replace(/\s+/g, " ").slice(0, 60)
    }`
  }

  const renderTree = (detail) => {
    // Indent only where the tree branches, so a long conversation stays a readable column.
    const indent = []
    const html = detail.tree.map((n, i) => {
      const parent = n.parent === null ? null : detail.tree[n.parent]
      indent[i] = parent === null ? 0 : indent[n.parent] + (parent.children > 1 ? 1 : 0)
      const marks = []
      if (n.children > 1) {
        marks.push(
          `<span class="mark branch" title="branch point: ${n.children} children">branch ×${n.children}</span>`
        )
      }
      for (const e of n.exports) {
        marks.push(`<span class="mark export" title="exported">⇢ ${esc(exportLabel(e))}</span>`)
      }
      if (n.drift !== null) {
        marks.push(`<span class="mark drift" title="${esc(n.drift.detail)}">drift: ${esc(n.drift.cause)}</span>`)
      }
      if (n.kind === "resp" && n.attempt_lengths.length > 1) {
        marks.push(`<span class="mark abort">${n.attempt_lengths.length} attempts</span>`)
      }
      if (n.kind === "resp" && n.moved_attempts.length > 0) {
        const where = n.moved_attempts.map((m) => `attempt ${m.attempt + 1}: ${m.worker} (${m.cause})`).join("; ")
        marks.push(`<span class="mark abort" title="${esc(where)}">moved ×${n.moved_attempts.length}</span>`)
      }
      if (n.parser_failures > 0) {
        marks.push(
          `<span class="mark parser" title="tool calls the parser dropped or could not read">parser ×${n.parser_failures}</span>`
        )
      }
      if (n.kind === "resp" && n.weight_versions.length > 0) {
        marks.push(`<span class="mark">w ${esc(n.weight_versions.join(","))}</span>`)
      }
      return `<div class="node" data-i="${i}" style="padding-left:${
        6 + indent[i] * 16
      }px"><span class="kind ${n.kind}">${n.kind}</span>` +
        `${n.tokens} tok · ${esc(nodeLabel(n))}${marks.join("")}</div>`
    })
    const note = detail.tree_source === "lineages"
      ? "<p class=\"legend\">Only the exported lineages (this dump has no forest; messages unknown).</p>"
      : detail.tree_source === "none"
      ? "<p class=\"legend\">No tree: these files hold no debug dump (--save-debug-rollout-data).</p>"
      : ""
    return `${note}<div id="tree">${
      html.join("")
    }</div><div id="node-detail"><span class="legend">Select a node to see its messages.</span></div>`
  }

  const showNode = (detail, i) => {
    const n = detail.tree[i]
    for (const el of document.querySelectorAll("#tree .node.on")) el.classList.remove("on")
    document.querySelector(`#tree .node[data-i="${i}"]`)?.classList.add("on")
    let html = `<div class="legend">${n.kind} ${esc(n.hash.slice(0, 16))} · ${n.tokens} tokens · ${n.children} children`
    if (n.kind === "resp") {
      html +=
        ` · ${esc(n.status ?? "")} · request ${esc(n.request_id ?? "")} · weights ${esc(n.weight_versions.join(","))}` +
        ` · aborts ${n.abort_count} · wall ${fmt(n.wall_s, 2)} s · generation ${fmt(n.generation_s, 2)} s`
      if (n.attempt_lengths.length > 1) html += ` · attempts ${n.attempt_lengths.join("+")} tokens`
      for (const m of n.moved_attempts) {
        html += ` · attempt ${m.attempt + 1} moved: worker ${esc(m.worker)} died (${esc(m.cause)})`
      }
      if (n.parser_failures > 0) html += ` · <span class="bad">${n.parser_failures} parser failures</span>`
    }
    html += "</div>"
    if (n.drift !== null) html += `<div class="drift-note">Drift (${esc(n.drift.cause)}): ${esc(n.drift.detail)}</div>`
    html += n.messages.map(messageHtml).join("") || "<span class=\"legend\">(no messages recorded)</span>"
    $("node-detail").innerHTML = html
  }

  const heat = (lp) => {
    // logprob 0 → green, ≤ -5 → red: where the policy was unsure.
    const t = Math.max(0, Math.min(1, -lp / 5))
    return `hsl(${Math.round(120 * (1 - t))},75%,${Math.round(82 - 10 * t)}%)`
  }

  const shown = (text) => text.replace(/\n/g, "↵\n").replace(/\t/g, "⇥\t")

  const tokenHtml = (view) => {
    const starts = new Map()
    for (const t of view.turns) {
      starts.set(
        t.start,
        `<span class="turn-mark" title="turn ${t.turn_idx}">turn ${t.turn_idx} · w ${
          esc(t.weight_versions.join(","))
        }` +
          `${t.abort_count > 0 ? ` · ${t.abort_count} aborts` : ""}${
            t.parser_failures > 0 ? ` · parser ×${t.parser_failures}` : ""
          }</span>`
      )
      for (const a of (t.attempts ?? []).slice(1)) {
        starts.set(
          a.start,
          (starts.get(a.start) ?? "") +
            `<span class="abort-mark" title="engine abort: resumed">⟂ abort · resumed on w ${
              esc(a.weight_version)
            }</span>`
        )
      }
    }
    const special = new Set(view.special)
    const out = []
    for (let i = 0; i < view.ids.length; i++) {
      const mark = starts.get(i)
      if (mark !== undefined) out.push(mark)
      const m = view.mask[i]
      const cls = `tok ${m === -1 ? "mp" : m === 1 ? "m1" : "m0"}${special.has(i) ? " special" : ""}`
      const lp = view.logprob[i]
      const style = m === 1 && lp !== null ? ` style="background:${heat(lp)}"` : ""
      out.push(`<span class="${cls}" data-i="${i}"${style}>${esc(shown(view.text[i]))}</span>`)
    }
    return out.join("")
  }

  const views = [null, null]
  const viewTurnOf = (view, i) => view.turns.find((t) => i >= t.start && i < t.end)

  const renderView = (slot, view, label) => {
    views[slot] = view
    const el = $(`view-${slot}`)
    el.querySelector(".view-title").textContent = label
    el.querySelector(".legend").textContent =
      `${view.ids.length} tokens · prompt ${view.prompt_length} · loss mask 1: ${view.generated} · ${view.turns.length} turns · ` +
      `reward ${JSON.stringify(view.reward)} · advantage ${
        Array.isArray(view.advantage) ? "per token" : fmt(view.advantage)
      } · ${view.status}` +
      (view.mask_source === "lineage" ? " · mask from the lineage (older dump)" : "")
    const tokens = el.querySelector(".token-view")
    tokens.innerHTML = tokenHtml(view)
    tokens.dataset.generated = String(view.generated)
  }

  const renderSession = async (key) => {
    const detail = await source.session(key)
    selected = detail
    lastRange = ""
    renderList()
    const r = detail.row
    const group = overview.sessions.filter((s) => s.step === r.step && s.group === r.group)
    const options = []
    for (const s of group) {
      for (const e of s.exports) {
        options.push({ key: s.key, exportName: e, label: `#${s.index} ${s.session_id.slice(0, 8)} ${exportLabel(e)}` })
      }
    }
    const opt = (o, i) => `<option value="${i}">${esc(o.label)}</option>`
    $("detail").innerHTML = `<h2>${esc(r.session_id)}</h2>` +
      `<div class="facts"><span>step <b>${
        esc(r.step)
      }</b></span><span>Group <b>${r.group}</b></span><span>index <b>${r.index}</b></span>` +
      `<span>reward <b>${fmt(r.reward)}</b></span><span>advantage <b>${
        fmt(r.advantage)
      }</b></span><span>status <b>${r.status}</b></span>` +
      `<span>turns <b>${r.turns}</b></span><span>requests <b>${r.requests}</b></span><span>aborts <b>${r.aborts}</b></span>` +
      `<span>weights <b>${
        esc(r.weight_versions.join(", "))
      }</b></span><span>parser failures <b>${r.parser_failures}</b></span>` +
      `<span>admission wait <b>${fmt(r.admission_wait_s, 2)} s</b></span>` +
      `<span>wall <b>${fmt(r.wall_s, 2)} s</b></span><span>generation <b>${fmt(r.generation_s, 2)} s</b></span>` +
      `<span>branches <b>${r.branches}</b></span><span>drift <b>${r.drift}</b></span></div>` +
      `<h3>SessionForest</h3>${renderTree(detail)}` +
      `<h3>Tokens</h3><div class="legend">grey: observation (mask 0) · colour: generated (mask 1), green = high logprob, red = low · ` +
      `faint: prompt · purple outline: special token · ↵ newline</div>` +
      `<div class="views two">` +
      [0, 1].map((slot) =>
        `<div id="view-${slot}"><div class="view-head"><b class="view-title"></b>` +
        `<select class="view-pick" data-slot="${slot}">${
          slot === 1 ? "<option value=\"\">compare with…</option>" : ""
        }${options.map(opt).join("")}</select>` +
        `</div><div class="legend"></div><div class="token-view"></div></div>`
      ).join("") + `</div>`
    $("detail").querySelector(".views").classList.toggle("two", false)
    const pick = async (slot, i) => {
      const o = options[i]
      const d = o.key === key ? detail : await source.session(o.key)
      const view = d.samples.find((v) => v.export_name === o.exportName) ?? d.samples[0]
      if (view !== undefined) renderView(slot, view, o.label)
      $("detail").querySelector(".views").classList.toggle("two", views[1] !== null)
    }
    views[0] = null
    views[1] = null
    const mine = options.findIndex((o) => o.key === key)
    for (const el of document.querySelectorAll(".view-pick")) {
      el.addEventListener("change", () => {
        const slot = Number(el.dataset.slot)
        if (el.value === "") {
          views[slot] = null
          $(`view-${slot}`).querySelector(".token-view").innerHTML = ""
          $("detail").querySelector(".views").classList.toggle("two", views[1] !== null)
        } else void pick(slot, Number(el.value))
      })
    }
    document.querySelector(".view-pick[data-slot=\"0\"]").value = String(mine)
    if (mine >= 0) await pick(0, mine)
    for (const el of document.querySelectorAll("#tree .node")) {
      el.addEventListener("click", () => showNode(detail, Number(el.dataset.i)))
    }
  }

  // ---- tooltip: the numbers of a token ----
  const tip = $("tip")
  document.addEventListener("mouseover", (event) => {
    const el = event.target instanceof Element ? event.target.closest(".tok") : null
    if (el === null) {
      tip.hidden = true
      return
    }
    const slot = Number(el.closest("[id^=view-]")?.id.slice(5))
    const view = views[slot]
    if (view === null || view === undefined) return
    const i = Number(el.dataset.i)
    const m = view.mask[i]
    const lp = view.logprob[i]
    const turn = viewTurnOf(view, i)
    const attempt = turn?.attempts?.find((a) => i >= a.start && i < a.end)
    tip.textContent =
      `position ${i}${i >= view.prompt_length ? ` (continuation ${i - view.prompt_length})` : " (prompt)"}\n` +
      `id ${view.ids[i]}  text ${JSON.stringify(view.text[i])}${view.special.includes(i) ? "  special" : ""}\n` +
      `loss mask ${m === -1 ? "– (prompt)" : m}` +
      (lp !== null ? `\nlogprob ${lp.toFixed(4)}  p ${Math.exp(lp).toFixed(4)}` : "") +
      (turn !== undefined
        ? `\nturn ${turn.turn_idx}  weights ${turn.weight_versions.join(",")}  aborts ${turn.abort_count}`
        : "") +
      (attempt !== undefined ? `\nattempt on weight version ${attempt.weight_version}` : "")
    tip.hidden = false
    const box = el.getBoundingClientRect()
    tip.style.left = `${Math.min(box.left, window.innerWidth - 360)}px`
    tip.style.top = `${box.bottom + 4}px`
  })

  // ---- timeline: per step, its Groups' Sessions and their phases on one time axis ----
  const PHASE_NAMES = {
    agent_start: "agent start",
    wait: "lease/admission wait",
    model: "model",
    parked: "parked",
    agent: "agent time",
    reward: "reward"
  }
  let timeline = null
  const renderTimeline = async () => {
    if (timeline === null) timeline = await source.timeline()
    const legend = `<div class="tl-legend">${
      timeline.phases.map((p) => `<span class="tl-key ph-${p}" data-phase="${p}">${esc(PHASE_NAMES[p] ?? p)}</span>`)
        .join("")
    }</div>`
    const steps = timeline.steps.filter((s) => step === null || s.step === step).map((s) => {
      const scale = s.duration_ms > 0 ? 100 / s.duration_ms : 0
      const groups = s.groups.map((g) =>
        `<div class="tl-group" data-group="${g.group}">Group ${g.group}</div>` +
        g.sessions.map((session) =>
          `<div class="tl-session" data-key="${esc(session.key)}"><span class="tl-label" title="${
            esc(session.session_id)
          }">${esc(session.session_id)}</span><span class="tl-track">${
            session.spans.map((span) =>
              `<span class="tl-span ph-${span.phase}" data-phase="${span.phase}" style="left:${
                (span.start * scale).toFixed(3)
              }%;width:${((span.end - span.start) * scale).toFixed(3)}%" title="${
                esc(PHASE_NAMES[span.phase] ?? span.phase)
              }: ${fmt(span.end - span.start, 1)} ms${
                span.request === undefined ? "" : ` (request ${span.request})`
              }"></span>`
            ).join("")
          }</span></div>`
        ).join("")
      ).join("")
      return `<div class="tl-step" data-step="${esc(s.step)}"><h2>step ${esc(s.step)} · ${
        fmt(s.duration_ms / 1000, 2)
      } s</h2>${groups}</div>`
    }).join("")
    const note = timeline.note === undefined ? "" : `<p class="empty">${esc(timeline.note)}</p>`
    $("timeline").innerHTML = legend + note + steps
  }
  const showTimeline = async (on) => {
    document.body.classList.toggle("timeline", on)
    $("timeline").hidden = !on
    $("show-timeline").setAttribute("aria-pressed", String(on))
    if (on) await renderTimeline()
  }

  // ---- wiring ----
  const start = async () => {
    overview = await source.overview()
    for (const g of overview.groups) groupsByKey.set(`${g.step}\u0000${g.group}`, g)
    $("source").textContent = overview.source
    $("source").title = overview.source
    $("count-steps").textContent = String(overview.steps.length)
    $("count-groups").textContent = String(overview.groups.length)
    $("count-sessions").textContent = String(overview.sessions.length)
    $("count-samples").textContent = String(overview.sessions.reduce((a, s) => a + s.samples, 0))
    $("notes").textContent = overview.notes.join(" ")
    const names = new Set()
    for (const s of overview.sessions) for (const e of s.exports) names.add(exportLabel(e))
    $("filter-export").innerHTML = `<option value="">any</option>${
      [...names].sort().map((n) => `<option>${esc(n)}</option>`).join("")
    }`
    renderSteps()
    rebuild()
    document.body.dataset.ready = "true"
  }

  $("list").addEventListener("scroll", () => requestAnimationFrame(renderList), { passive: true })
  window.addEventListener("resize", () => {
    lastRange = ""
    renderList()
  })
  $("list").addEventListener("click", (event) => {
    const el = event.target instanceof Element ? event.target.closest(".row.session") : null
    if (el !== null) void renderSession(el.dataset.key).catch(fail)
  })
  $("steps").addEventListener("click", (event) => {
    const el = event.target instanceof Element ? event.target.closest("button") : null
    if (el === null) return
    step = el.dataset.step === "" ? null : el.dataset.step
    renderSteps()
    rebuild()
    if (!$("timeline").hidden) void renderTimeline().catch(fail)
  })
  $("show-timeline").addEventListener("click", () => void showTimeline($("timeline").hidden).catch(fail))
  // A Session's row opens that Session's view.
  $("timeline").addEventListener("click", (event) => {
    const el = event.target instanceof Element ? event.target.closest(".tl-session") : null
    if (el === null) return
    void showTimeline(false).then(() => renderSession(el.dataset.key)).catch(fail)
  })
  for (
    const id of [
      "filter-status",
      "filter-export",
      "filter-reward-min",
      "filter-reward-max",
      "filter-parser",
      "filter-aborted",
      "filter-drift",
      "sort",
      "sort-desc",
      "grouped"
    ]
  ) {
    $(id).addEventListener("input", rebuild)
    $(id).addEventListener("change", rebuild)
  }
  let searchTimer = 0
  $("search").addEventListener("input", () => {
    clearTimeout(searchTimer)
    searchTimer = setTimeout(async () => {
      const q = $("search").value.trim()
      searchKeys = q === "" ? null : new Set(await source.search(q))
      rebuild()
      document.body.dataset.searched = q
    }, 150)
  })

  const fail = (error) => {
    $("notes").textContent = `inspect: ${error instanceof Error ? error.message : String(error)}`
  }
  start().catch(fail)
})()
