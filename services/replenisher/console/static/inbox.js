(function () {
  // New requests appear by themselves; never while the manager is filling in a decision.
  const live = () => document.getElementById('inbox-live');
  let touched = false;
  document.addEventListener('input', () => { touched = true; });
  document.addEventListener('focusin', (e) => { if (e.target.closest('form')) touched = true; });
  async function refresh() {
    const box = live();
    if (box && !touched) {
      try {
        const r = await fetch(box.dataset.fragment, {cache: 'no-store'});
        // Signed out meanwhile (the session ended): the fragment's request went to the sign-in
        // page; the whole page goes there, rather than the sign-in form into the inbox.
        if (r.redirected) { location.reload(); return; }
        if (r.ok) { box.innerHTML = await r.text(); }
      } catch (e) { /* the next tick tries again */ }
    }
    setTimeout(refresh, 5000);
  }
  setTimeout(refresh, 5000);
  // The countdowns tick in the page: no request to the server for that.
  function left(s) {
    if (s <= 0) return 'deadline passed';
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    const sec = Math.floor(s % 60);
    if (d) return d + 'd ' + h + 'h left';
    if (h) return h + 'h ' + m + 'm left';
    return m + 'm ' + String(sec).padStart(2, '0') + 's left';
  }
  setInterval(() => {
    for (const el of document.querySelectorAll('.countdown[data-until]')) {
      const s = Number(el.dataset.until) - Date.now() / 1000;
      el.textContent = left(s);
      el.classList.toggle('urgent', s < 3600);
    }
  }, 1000);
})();
