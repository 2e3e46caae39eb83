// Links into Airflow's own UI (target="_top"). Airflow shows this page in an iframe sandboxed without
// allow-top-navigation, so the browser refuses to navigate the top window from here. The page shares
// Airflow's origin: it asks Airflow's router to go there instead (a history entry in the router's own
// format, then the popstate event the router listens to). Opened on its own, the link works as is.
document.querySelectorAll('a[target="_top"]').forEach((a) => a.addEventListener("click", (event) => {
  if (window.top === window) return;
  try {
    const top = window.top;
    const url = new URL(a.href, location.href);
    if (url.origin !== top.location.origin) return;
    event.preventDefault();
    const index = (top.history.state && Number.isInteger(top.history.state.idx)) ? top.history.state.idx + 1 : 0;
    top.history.pushState({usr: null, key: Math.random().toString(36).slice(2, 10), idx: index}, "",
      url.pathname + url.search + url.hash);
    top.dispatchEvent(new PopStateEvent("popstate", {state: top.history.state}));
  } catch (error) {
    // another origin after all: leave the link to the browser
  }
}));
