(function () {
  const section = () => document.getElementById('timeline');
  async function refresh() {
    const s = section();
    if (!s || s.dataset.finished === 'true') return;
    try {
      const r = await fetch(s.dataset.fragment, {cache: 'no-store'});
      if (r.redirected) { location.reload(); return; }  // signed out meanwhile: to the sign-in page
      if (r.ok) { s.outerHTML = await r.text(); }
    } catch (e) { /* the next tick tries again */ }
    setTimeout(refresh, 1500);
  }
  setTimeout(refresh, 1500);
})();
