// Timestamps arrive as "YYYY-MM-DD HH:MM:SS UTC"; show them in the time zone chosen in Airflow's
// UI (localStorage "timezone", a JSON string; default the browser's), still with the zone's name.
(function () {
  let zone;
  try { zone = JSON.parse(localStorage.getItem("timezone") || "null"); } catch (e) { zone = null; }
  zone = zone || Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  let fmt;
  try {
    fmt = new Intl.DateTimeFormat("en-CA", {timeZone: zone, year: "numeric", month: "2-digit",
      day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
      timeZoneName: "short"});
  } catch (e) { return; }  // unknown zone: keep UTC
  document.querySelectorAll("time.ts[datetime]").forEach((el) => {
    const when = new Date(el.getAttribute("datetime"));
    if (isNaN(when)) return;
    const p = Object.fromEntries(fmt.formatToParts(when).map((x) => [x.type, x.value]));
    el.title = el.textContent;
    el.textContent = `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.timeZoneName}`;
  });
})();
