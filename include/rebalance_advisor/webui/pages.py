"""Server-rendered HTML pages: the groups table and one group's picture with approve/reject.

No template engine and no JS framework: f-strings with every value escaped, SVG from :mod:`.svg`,
and a few lines of inline vanilla JS (table sorting, the confirmation dialog, the POST).
"""

from __future__ import annotations

from html import escape
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from rebalance_advisor.webui import queries, svg
from rebalance_advisor.webui.auth import PageUser, approval_dag_id, can_trigger

router = APIRouter(include_in_schema=False)

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#017cee;color:#fff;padding:10px 20px;display:flex;gap:16px;align-items:baseline}
header a{color:#fff} main{padding:16px 20px;max-width:1200px}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{padding:6px 10px;border-bottom:1px solid #e5e5e5;text-align:left;font-size:14px}
th.sortable{cursor:pointer;user-select:none} th.sortable:after{content:" \\2195";color:#aaa}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.flagged td{background:#fff1f0} .hot{color:#c0392b;font-weight:600}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;background:#eee}
.status-recommended{background:#fff3cd}.status-approved{background:#d4edda}.status-rejected{background:#f8d7da}
.status-published{background:#cce5ff}.status-superseded,.status-skipped{background:#e2e3e5}
.cards{display:flex;flex-wrap:wrap;gap:16px}.card{background:#fff;border:1px solid #e5e5e5;padding:12px;border-radius:6px}
button{padding:6px 14px;border-radius:4px;border:1px solid #888;cursor:pointer;font-size:14px}
button.approve{background:#2e7d32;color:#fff;border-color:#2e7d32}button.reject{background:#fff;color:#c0392b;border-color:#c0392b}
.error{background:#f8d7da;border:1px solid #f5c2c7;padding:16px;border-radius:6px}
dialog{border:1px solid #888;border-radius:6px;padding:20px} .muted{color:#777;font-size:13px}
"""

SORT_JS = """
document.querySelectorAll('th.sortable').forEach((th, col) => th.addEventListener('click', () => {
  const body = th.closest('table').tBodies[0], asc = th.dataset.dir !== 'asc';
  th.dataset.dir = asc ? 'asc' : 'desc';
  const idx = [...th.parentNode.children].indexOf(th);
  const val = r => { const c = r.children[idx]; return c.dataset.v ?? c.textContent.trim(); };
  const rows = [...body.rows].sort((a, b) => {
    const x = val(a), y = val(b), nx = parseFloat(x), ny = parseFloat(y);
    if (x === '' || y === '') return (x === '') - (y === '');
    const d = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
    return asc ? d : -d; });
  rows.forEach(r => body.appendChild(r)); }));
"""

DECIDE_JS = """
const dlg = document.getElementById('confirm');
let pending = null;
document.querySelectorAll('button[data-action]').forEach(b => b.addEventListener('click', () => {
  pending = b.dataset;
  document.getElementById('confirm-text').textContent =
    `${b.dataset.action === 'approve' ? 'Approve' : 'Reject'} plan #${b.dataset.plan} for ${b.dataset.group}?`;
  dlg.showModal(); }));
document.getElementById('confirm-no').addEventListener('click', () => dlg.close());
document.getElementById('confirm-yes').addEventListener('click', async () => {
  dlg.close();
  const out = document.getElementById('decision-result');
  const r = await fetch(`${BASE}/api/plans/${pending.plan}/${pending.action}`, {method: 'POST',
    credentials: 'same-origin', headers: {'Content-Type': 'application/json'}, body: '{}'});
  const data = await r.json().catch(() => ({}));
  if (r.ok) { location.reload(); }
  else { out.className = 'error'; out.textContent = `${r.status}: ${data.detail ?? r.statusText}`; }
});
"""


def base_path(request: Request) -> str:
    """Where this app is mounted (``/rebalance-advisor`` inside Airflow), for links and fetches."""
    return request.scope.get("root_path", "").rstrip("/")


def layout(request: Request, title: str, body: str, script: str = "") -> str:
    base = escape(base_path(request))
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{escape(title)} · Rebalance advisor</title><style>{STYLE}</style></head><body>
<header><strong>Rebalance advisor</strong><a href="{base}/">groups</a>
<a href="{base}/openapi.json">API schema</a></header><main>{body}</main>
<script>const BASE = {base_path(request)!r};{script}</script></body></html>"""


def error_page(request: Request, title: str, message: str, status_code: int) -> HTMLResponse:
    body = f'<h1>{escape(title)}</h1><div class="error" id="error">{escape(message)}</div>'
    return HTMLResponse(layout(request, title, body), status_code=status_code)


def _num(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def _badge(status: str | None) -> str:
    if not status:
        return "—"
    return f'<span class="badge status-{escape(status)}">{escape(status)}</span>'


@router.get("/", response_class=HTMLResponse)
async def groups_page(request: Request, user: PageUser) -> HTMLResponse:
    data = await run_in_threadpool(queries.list_groups, request.app.state.db_url())
    base = escape(base_path(request))
    threshold = data["threshold"]
    rows = []
    for g in sorted(data["groups"], key=lambda r: (-(r["imbalance"] or 0), r["group_id"])):
        gid = escape(g["group_id"])
        hot = g["imbalance"] is not None and g["imbalance"] >= threshold
        rows.append(
            f'<tr class="{"flagged" if g["flagged"] else ""}" data-group="{gid}">'
            f'<td><a href="{base}/groups/{escape(g["group_id"], quote=True)}">{gid}</a></td>'
            f"<td>{escape(g['state'])}</td><td>{escape(g['type'])}</td>"
            f'<td class="num">{g["members"]}</td>'
            f'<td class="num" data-v="{g["total_lag"] if g["total_lag"] is not None else ""}">{_num(g["total_lag"])}</td>'
            f'<td class="num imbalance{" hot" if hot else ""}" data-v="{g["imbalance"] if g["imbalance"] is not None else ""}">'
            f"{_num(g['imbalance'], 2)}</td>"
            f"<td>{escape(g['outcome'] or '—')}</td><td>{_badge(g['latest_plan_status'])}</td></tr>"
        )
    snap = data["snapshot"]
    intro = (
        f'<p class="muted">Snapshot #{snap["id"]} taken {escape(str(snap["taken_at"]))} ({escape(snap["status"])}). '
        f"Imbalance = max / mean member lag; highlighted at ≥ {threshold:g}. Signed in as "
        f"{escape(user.get_name())}.</p>"
        if snap
        else '<p class="muted">No snapshot stored yet: run the snapshot DAG.</p>'
    )
    head = "".join(
        f'<th class="sortable{" num" if num else ""}">{name}</th>'
        for name, num in [("group", False), ("state", False), ("type", False), ("members", True),
                          ("total lag", True), ("imbalance", True), ("outcome", False), ("latest plan", False)]
    )  # fmt: skip
    body = f'<h1>Consumer groups</h1>{intro}<table id="groups"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return HTMLResponse(layout(request, "Consumer groups", body, SORT_JS))


def _chosen_plan(plans: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The plan to picture: the newest recommended one, else the newest that is not skipped."""
    for wanted in (("recommended",), ("approved", "published", "rejected", "superseded")):
        for p in plans:
            if p["status"] in wanted:
                return p
    return None


def _plan_block(request: Request, group_id: str, detail: dict[str, Any] | None, allowed: bool) -> str:
    if detail is None:
        return "<h2>Plan</h2><p>No plan for this group yet.</p>"
    plan = detail["plan"]
    pid = plan["id"]
    moves = "".join(
        f"<tr><td>{escape(m['topic'])}</td><td class='num'>{m['partition']}</td><td class='num'>{_num(m['lag'])}</td>"
        f"<td>{escape(m['from_label'] or '(unowned)')}</td><td>→ {escape(m['to_label'])}</td></tr>"
        for m in detail["moves"]
    )
    buttons = ""
    if plan["status"] == "recommended" and allowed:
        data = f'data-plan="{pid}" data-group="{escape(group_id, quote=True)}"'
        buttons = (
            f'<p><button class="approve" id="approve" data-action="approve" {data}>Approve plan</button> '
            f'<button class="reject" id="reject" data-action="reject" {data}>Reject</button></p>'
        )
    elif plan["status"] == "recommended":
        buttons = (
            f'<p class="muted">Approving needs the right to trigger DAG {escape(approval_dag_id())}.</p>'
        )
    elif plan["status"] == "approved":
        buttons = (
            '<p id="publish-note">Approved, not yet published: approving here only records the decision. '
            f"Manual-assign plans are published by the <b>{escape(approval_dag_id())}</b> DAG "
            f"(trigger it with plan id {pid} and decision <code>approve</code>) or "
            f"<code>rebalance-advisor plan-status publish {pid}</code>. Plans of dynamic "
            "(<code>subscribe()</code>) groups are advice only.</p>"
        )
    return f"""<h2>Plan #{pid} <span id="plan-status">{_badge(plan["status"])}</span></h2>
<p>Strategy <b>{escape(plan["strategy"])}</b>, from snapshot #{plan["snapshot_id"]}:
max member lag {_num(plan["max_lag_before"])} → {_num(plan["max_lag_after"])},
imbalance {plan["imbalance_before"]:.2f} → {plan["imbalance_after"]:.2f}, {plan["moves"]} move(s),
lower bound {_num(plan["lower_bound"])}. <span class="muted">{escape(plan["reason"])}</span></p>
{buttons}<div id="decision-result"></div>
<h3>Moves</h3><table id="moves"><thead><tr><th>topic</th><th class="num">partition</th><th class="num">lag</th>
<th>from</th><th>to</th></tr></thead><tbody>{moves or '<tr><td colspan="5">no partition moves</td></tr>'}</tbody></table>
<dialog id="confirm"><p id="confirm-text"></p><button id="confirm-yes" class="approve">Yes</button>
<button id="confirm-no">Cancel</button></dialog>"""


@router.get("/groups/{group_id}", response_class=HTMLResponse)
async def group_page(
    request: Request, user: PageUser, group_id: Annotated[str, Path(max_length=255)]
) -> HTMLResponse:
    url = request.app.state.db_url()
    group = await run_in_threadpool(queries.group_detail, url, group_id, 30, 10)
    chosen = _chosen_plan(group["plans"])
    detail = await run_in_threadpool(queries.plan_detail, url, chosen["id"]) if chosen else None
    threshold = group["threshold"]
    if detail:
        members = detail["members"]
        chart = svg.member_lag_bars(
            [m["label"] for m in members],
            [m["lag_before"] for m in members],
            [m["lag_after"] for m in members],
        )
        caption = (
            f"Member lag in snapshot #{detail['plan']['snapshot_id']} and under plan #{detail['plan']['id']}."
        )
    else:
        members = group["now"]["members"]
        chart = svg.member_lag_bars([m["label"] for m in members], [m["lag"] for m in members], None)
        caption = "Member lag now (no plan to compare with)."
    line = svg.imbalance_line(
        [(str(p["snapshot_id"]), p["imbalance"]) for p in group["imbalance_history"]], threshold
    )
    outcome = group["outcome"] or {}
    imbalance = outcome.get("imbalance_before")
    hot = imbalance is not None and imbalance >= threshold
    parts = "".join(
        f"<tr><td>{escape(p['topic'])}</td><td class='num'>{p['partition']}</td><td class='num'>{_num(p['lag'])}</td>"
        f"<td>{escape(p['owner'] or '—')}</td></tr>"
        for p in group["now"]["partitions"]
    )
    body = f"""<h1>Group <span id="group-id">{escape(group_id)}</span></h1>
<div class="cards"><div class="card">state <b>{escape(str(group.get("state") or "—"))}</b>, type
<b>{escape(str(group.get("type") or "—"))}</b>, {group.get("members") or 0} member(s)</div>
<div class="card">imbalance <b id="imbalance" class="{"hot" if hot else ""}">{_num(imbalance, 2)}</b>
<span class="muted">(threshold {threshold:g})</span></div>
<div class="card">total lag <b>{_num(outcome.get("total_lag"))}</b></div>
<div class="card">advisor: <b id="outcome">{escape(outcome.get("outcome") or "not planned yet")}</b>
<span class="muted">{escape(outcome.get("reason") or "")}</span></div></div>
<h2>Member lag: now vs plan</h2><figure>{chart}<figcaption class="muted">{escape(caption)}</figcaption></figure>
<h2>Imbalance over time</h2><figure>{line}</figure>
{_plan_block(request, group_id, detail, can_trigger(user))}
<h2>Partitions now <span class="muted">(snapshot #{group["snapshot_id"] or "—"})</span></h2>
<table id="partitions"><thead><tr><th class="sortable">topic</th><th class="sortable num">partition</th>
<th class="sortable num">lag</th><th class="sortable">owner</th></tr></thead><tbody>{parts}</tbody></table>"""
    return HTMLResponse(layout(request, f"Group {group_id}", body, SORT_JS + (DECIDE_JS if detail else "")))
