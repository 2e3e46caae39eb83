// Follow Airflow's light/dark choice (its UI keeps it in localStorage "theme": light, dark or
// system); without one, the browser's prefers-color-scheme decides (style.css).
(function () {
  const root = document.documentElement;
  function apply() {
    let theme = null;
    try { theme = localStorage.getItem("theme"); } catch (e) { /* storage blocked */ }
    if (theme === "light" || theme === "dark") root.dataset.theme = theme;
    else delete root.dataset.theme;
  }
  apply();
  window.addEventListener("storage", (e) => { if (e.key === "theme") apply(); });
})();
