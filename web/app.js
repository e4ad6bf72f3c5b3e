/* qpool dashboard: plain JavaScript, no dependencies, no external requests.
 * Every URL is relative (the page may be served under a prefix), all data is
 * rendered with textContent/createElement (never innerHTML), and the strict
 * CSP (script-src 'self', style-src 'self') holds: no inline code or styles. */
'use strict';
(() => {
  var FAST = 2000, SLOW = 30000, HEALTH = 10000, MAX_ROWS = 100, MORE_ROWS = 250;
  var TOKEN_KEY = 'qpool.token';
  var main = document.getElementById('main');
  var noticeEl = document.getElementById('notice');
  var tokenForm = document.getElementById('token-form');
  var pill = document.getElementById('status-pill');
  var updatedEl = document.getElementById('last-updated');

  /* ---------- small DOM helpers ---------- */
  function el(tag, attrs) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      var v = attrs[k];
      if (v == null || v === false) continue;
      if (k === 'text') e.textContent = String(v);
      else if (k === 'class') e.className = v;
      else if (k === 'on') for (var ev in v) e.addEventListener(ev, v[ev]);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (var i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }
  function add(e, c) {
    if (c == null || c === false) return;
    if (Array.isArray(c)) c.forEach(x => { add(e, x); });
    else e.append(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  var SVG = 'http://www.w3.org/2000/svg';
  function sv(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) if (attrs[k] != null) { if (k === 'text') e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]); }
    return e;
  }

  /* ---------- formatting ---------- */
  var nf = {};
  /* A pool's share of its fleet budget (fleet_max_processes). */
  function budgetText(b) {
    var t = 'budget ' + num(b.held) + '/' + num(b.budget) + ' held';
    if (b.waiting) t += ' · waiting for budget';
    if (b.lease === 'failing') t += ' · lease not renewed';
    return t;
  }

  function num(n, d) {
    if (n == null || n !== n) return '–';
    d = d == null ? 0 : d;
    return (nf[d] || (nf[d] = new Intl.NumberFormat(undefined, { maximumFractionDigits: d }))).format(n);
  }
  function dur(ms) {
    if (ms == null || ms !== ms) return '–';
    if (ms < 1) return num(ms, 3) + ' ms';
    if (ms < 1000) return num(ms, ms < 10 ? 2 : 1) + ' ms';
    var s = ms / 1000;
    if (s < 60) return num(s, 2) + ' s';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + Math.floor(s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor(s % 3600 / 60) + 'm';
    return Math.floor(s / 86400) + 'd ' + Math.floor(s % 86400 / 3600) + 'h';
  }
  var df = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: '2-digit', second: '2-digit' });
  function when(ms) { return ms ? df.format(ms) : '–'; }
  function kb(k) {
    if (k == null) return '–';
    return k >= 1048576 ? num(k / 1048576, 2) + ' GB' : k >= 1024 ? num(k / 1024, 1) + ' MB' : num(k) + ' KB';
  }
  function pct(x) { return x == null || x !== x ? '–' : num(x * 100, x < 0.1 ? 2 : 1) + ' %'; }
  function pillEl(state, text) { return el('span', { class: 'pill s-' + String(state).replace(/[^a-z_]/gi, ''), text: text || state }); }
  function enc(s) { return encodeURIComponent(s); }
  function jobLink(uuid, text) {
    return uuid ? el('a', { href: '#/jobs/' + enc(uuid), text: text == null ? uuid : text }) : el('span', { text: text || '–' });
  }

  /* ---------- notices ---------- */
  var noticeTimer;
  function notice(msg, ok) {
    clearTimeout(noticeTimer);
    clear(noticeEl);
    noticeEl.className = ok ? 'ok' : '';
    noticeEl.append(el('span', { class: 'msg', text: msg }));
    noticeEl.append(el('button', { type: 'button', class: 'link', text: 'dismiss', on: { click: hideNotice } }));
    noticeEl.hidden = false;
    if (ok) noticeTimer = setTimeout(hideNotice, 4000);
  }
  function hideNotice() { noticeEl.hidden = true; clear(noticeEl); }

  /* ---------- API ---------- */
  function token() { try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; } }
  function headers(json) {
    var h = { Accept: 'application/json' };
    var t = token();
    if (t) h.Authorization = 'Bearer ' + t;
    if (json) h['Content-Type'] = 'application/json';
    return h;
  }
  function ApiError(status, msg) { this.status = status; this.message = msg; }
  /* Why a read needs the token (the server serves aggregates without it, at most). */
  function whyToken(path) {
    if (/^api\/jobs\/running/.test(path)) return 'Running jobs show job records: they need the API token.';
    if (/^api\/jobs\/recent/.test(path)) return 'Recent jobs show job records and exceptions: they need the API token.';
    if (/^api\/jobs\//.test(path)) return "A job's page shows its payload and exception: it needs the API token.";
    if (/^api\/failed/.test(path)) return 'Failed jobs show payloads and exceptions: they need the API token.';
    return 'This page needs the API token.';
  }
  /* Said on the page itself too, where its data would be. */
  function needsToken(root, why) {
    var p = root.querySelector('.needs-token');
    if (!p) {
      p = el('p', { class: 'empty needs-token', id: 'needs-token' });
      root.append(p);
    }
    clear(p).append(el('span', { text: why + ' ' }), el('button', { type: 'button', class: 'link', text: 'Enter the token', on: { click: () => { askToken(why); } } }));
  }
  var authNeeded = false, pendingAction = null;
  /* GET path, resolve to the JSON. allow: statuses whose JSON is still wanted (healthz 503). */
  function get(path, signal, allow) {
    return fetch(path, { headers: headers(), cache: 'no-store', credentials: 'same-origin', signal: signal }).then(r => {
      return r.text().then(t => {
        var j = null;
        try { j = t ? JSON.parse(t) : null; } catch (e) { /* not JSON */ }
        /* 401: a token is needed; 403 on a read: a Host name other than an IP address or localhost needs it too */
        if (r.status === 401 || r.status === 403) {
          var why = r.status === 403 ? 'This address needs the token (403).' : token() ? 'The token was refused.'
            : j && j.error && /none is configured/.test(j.error) ? 'The server: ' + j.error + '.' : whyToken(path);
          askToken(why, true);
          throw new ApiError(401, why);
        }
        if (!r.ok && !(allow && allow.indexOf(r.status) >= 0))
          throw new ApiError(r.status, (j && j.error) || ('HTTP ' + r.status + ' ' + r.statusText));
        return { status: r.status, data: j, text: t };
      });
    });
  }
  function post(path, body, method) {
    return fetch(path, { method: method || 'POST', headers: headers(true), body: JSON.stringify(body || {}), cache: 'no-store', credentials: 'same-origin' })
      .then(r => {
        return r.text().then(t => {
          var j = null;
          try { j = t ? JSON.parse(t) : null; } catch (e) { /* not JSON */ }
          if (r.ok && j && j.ok !== false) return j;
          var msg = (j && j.error) || ('HTTP ' + r.status + ' ' + r.statusText);
          throw new ApiError(r.status, msg);
        });
      });
  }
  /* An action: POST, say what happened, refresh the page's data. */
  /* A bulk retry answers a page at a time: go on with its cursor until nothing is left. */
  /* One by filter answers a step at a time too, its cursor a text: the counts add up. */
  function postAll(path, body, done, method) {
    return post(path, body, method).then(j => {
      var d = done || {};
      ['retried', 'forgotten', 'deleted', 'matched'].forEach(k => { if (j[k] != null) d[k] = (d[k] || 0) + j[k]; });
      if (j.cursor && (j.remaining > 0 || typeof j.cursor === 'string')) return postAll(path, Object.assign({}, body, { cursor: j.cursor }), d, method);
      return Object.assign(j, d);
    });
  }

  function act(label, path, body, btn, method) {
    var run = () => {
      if (btn) btn.disabled = true;
      return postAll(path, body, 0, method).then(j => {
        var extra = j.retried != null ? ' (' + num(j.retried) + ' retried)' : j.forgotten != null ? ' (' + num(j.forgotten) + ' forgotten)'
          : j.deleted != null ? ' (' + num(j.deleted) + ' deleted)' : '';
        notice(label + ': done' + extra, true);
      }, e => {
        if (e.status === 401) {
          pendingAction = run;
          askToken(label + ' needs the API token' + (token() ? ' (the one given was refused).' : '.'), false);
          notice(label + ' failed: unauthorized (401): enter the token, the action runs again after saving.');
        } else if (e.status === 403) {
          notice(label + ' failed (403): ' + (e.message || 'forbidden') + ' (actions need a token configured on the server: http.token_file or token_env).');
        } else notice(label + ' failed' + (e.status ? ' (' + e.status + ')' : '') + ': ' + (e.message || String(e)));
      }).then(() => { if (btn) btn.disabled = false; refresh(true); });
    };
    return run();
  }

  /* ---------- token prompt ---------- */
  /* auth: polling stops until a token is saved */
  function askToken(why, auth) {
    if (auth) authNeeded = true;
    tokenForm.hidden = false;
    var lab = tokenForm.querySelector('label');
    lab.textContent = why ? why + ' Token:' : 'API token';
    var inp = document.getElementById('token-input');
    if (document.activeElement !== inp) inp.focus();
  }
  tokenForm.addEventListener('submit', ev => {
    ev.preventDefault();
    var inp = document.getElementById('token-input');
    var v = inp.value.trim();
    if (!v) return;
    try { sessionStorage.setItem(TOKEN_KEY, v); } catch (e) { notice('sessionStorage unavailable: the token is not kept.'); }
    inp.value = '';
    tokenForm.hidden = true;
    authNeeded = false;
    hideNotice();
    var p = pendingAction; pendingAction = null;
    if (p) p(); else navigate();
  });
  document.getElementById('token-cancel').addEventListener('click', () => { tokenForm.hidden = true; pendingAction = null; });
  document.getElementById('token-clear').addEventListener('click', () => {
    try { sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* ignore */ }
    tokenForm.hidden = true; notice('Token forgotten.', true); refresh(true);
  });
  document.getElementById('token-button').addEventListener('click', () => { askToken(''); });

  /* ---------- tables ---------- */
  /* cols: 'Head|#Numeric head|...'; rows built by rowFn(item) -> <tr>. Caps to MAX_ROWS with "show more". */
  function table(cols, items, rowFn, opts) {
    opts = opts || {};
    var wrap = el('div');
    var tw = el('div', { class: 'tw' });
    var t = el('table', { id: opts.id });
    var hr = el('tr');
    cols = cols.split('|');
    cols.forEach(c => { hr.append(c[0] === '#' ? el('th', { class: 'n', text: c.slice(1) }) : el('th', { text: c })); });
    t.append(el('thead', null, hr));
    var tb = el('tbody');
    t.append(tb);
    tw.append(t);
    wrap.append(tw);
    var limit = opts.limit || MAX_ROWS;
    /* "show more" finds its tbody in the DOM: after a morph (see put) the kept tbody is the old one */
    function more(ev, count) {
      var body = ev ? btn.parentNode.querySelector('tbody') : tb, shown = items.length ? body.rows.length : 0;
      var f = document.createDocumentFragment(), end = Math.min(items.length, shown + (count || limit));
      for (var i = shown; i < end; i++) f.append(rowFn(items[i], i));
      body.append(f);
      btn.hidden = end >= items.length;
      btn.textContent = 'Show more (' + num(items.length - end) + ' more)';
    }
    var btn = el('button', { type: 'button', class: 'more', on: { click: ev => { more(ev, MORE_ROWS); } } });
    if (!items.length) tb.append(el('tr', null, el('td', { class: 'empty', colspan: cols.length, text: opts.empty || 'Nothing to show.' })));
    wrap.append(btn);
    more(null, Math.max(limit, opts.keepShown || 0));
    return wrap;
  }
  function shownIn(c) { var b = c.querySelector('tbody'); return b ? b.rows.length : 0; }
  /* Show a freshly built table in c, morphing the one already there: rows with the same key keep
   * their elements (focus, typed text, element references), only changed text and attributes are touched. */
  function put(c, n) {
    if (c.childNodes.length === 1 && c.firstChild.nodeName === n.nodeName) morph(c.firstChild, n);
    else clear(c).append(n);
  }
  var KEYS = ['data-action', 'data-uuid', 'data-pool', 'data-queue', 'data-pid', 'data-host-id', 'data-key', 'id'];
  function morph(a, b) {
    if (a.nodeType !== b.nodeType || a.nodeName !== b.nodeName || a.nodeName === 'BUTTON' && !a.hasAttribute('data-action') ||
        a.nodeName === 'svg' || a.nodeType === 1 && KEYS.some(k => a.getAttribute(k) !== b.getAttribute(k))) { a.parentNode.replaceChild(b, a); return; }
    if (a.nodeType !== 1) { if (a.nodeValue !== b.nodeValue) a.nodeValue = b.nodeValue; return; }
    if (a.nodeName !== 'INPUT') {
      for (var i = a.attributes.length - 1; i >= 0; i--) if (!b.hasAttribute(a.attributes[i].name)) a.removeAttribute(a.attributes[i].name);
      for (i = 0; i < b.attributes.length; i++) { var at = b.attributes[i]; if (a.getAttribute(at.name) !== at.value) a.setAttribute(at.name, at.value); }
    } else if (a.placeholder !== b.placeholder) a.placeholder = b.placeholder;
    var ac = a.childNodes, bc = Array.prototype.slice.call(b.childNodes);
    for (i = 0; i < bc.length; i++) if (i < ac.length) morph(ac[i], bc[i]); else a.append(bc[i]);
    while (ac.length > bc.length) a.removeChild(a.lastChild);
  }
  function td(v, cls, title) { return el('td', { class: cls, title: title }, v); }
  function tdn(v) { return el('td', { class: 'n' }, v); }

  /* ---------- charts (inline SVG) ---------- */
  /* series: [{name, values:[number|null]}], xs: [ms] shared. fmt: value formatter. */
  function lineChart(title, xs, series, fmt) {
    var W = 420, H = 150, L = 40, R = 6, T = 8, B = 18;
    var box = el('div', { class: 'chart' });
    box.append(el('h3', { text: title }));
    var max = 0;
    series.forEach(s => { s.values.forEach(v => { if (v != null && v > max) max = v; }); });
    if (max <= 0) max = 1;
    max = niceMax(max);
    var svg = sv('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': title });
    var n = xs.length, x0 = xs[0], x1 = xs[n - 1] || x0 + 1;
    function X(x) { return L + (x1 === x0 ? 0 : (x - x0) / (x1 - x0)) * (W - L - R); }
    function Y(v) { return T + (1 - v / max) * (H - T - B); }
    for (var g = 0; g <= 4; g++) {
      var gv = max * g / 4, gy = Y(gv);
      svg.append(sv('line', { class: 'grid', x1: L, x2: W - R, y1: gy, y2: gy }));
      svg.append(sv('text', { class: 'axis', x: L - 4, y: gy + 3, 'text-anchor': 'end', text: fmt(gv, true) }));
    }
    if (n) {
      var tl = [0, Math.floor(n / 2), n - 1];
      tl.forEach((i, k) => {
        var d = new Date(xs[i]);
        var lab = (x1 - x0 > 86400000 * 0.9 && k !== 2 ? d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' }) + ' ' : '') +
          d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
        svg.append(sv('text', { class: 'axis', x: X(xs[i]), y: H - 5, 'text-anchor': k === 0 ? 'start' : k === 2 ? 'end' : 'middle', text: lab }));
      });
    }
    series.forEach((s, si) => {
      var d = '', pen = false;
      for (var i = 0; i < n; i++) {
        var v = s.values[i];
        if (v == null) { pen = false; continue; }
        d += (pen ? 'L' : 'M') + X(xs[i]).toFixed(1) + ' ' + Y(v).toFixed(1);
        if (!pen && (i + 1 >= n || s.values[i + 1] == null)) svg.append(sv('circle', { class: 'dot d' + si, cx: X(xs[i]).toFixed(1), cy: Y(v).toFixed(1), r: 1.8 }));
        pen = true;
      }
      if (d) svg.append(sv('path', { class: 'line l' + si, d: d }));
    });
    var cursor = sv('line', { class: 'cursor', y1: T, y2: H - B, x1: -10, x2: -10 });
    svg.append(cursor);
    var legend = el('div', { class: 'legend' });
    function showLegend(i) {
      clear(legend);
      if (i != null && n) legend.append(el('span', { text: new Date(xs[i]).toLocaleString() }));
      series.forEach((s, si) => {
        legend.append(el('i', { class: 'l' + si }));
        var v = i == null ? null : s.values[i];
        legend.append(document.createTextNode(s.name + (i == null ? '' : ': ' + (v == null ? '–' : fmt(v)))));
      });
    }
    svg.addEventListener('mousemove', ev => {
      var r = svg.getBoundingClientRect();
      if (!n || !r.width) return;
      var px = (ev.clientX - r.left) / r.width * W;
      var i = Math.round((px - L) / (W - L - R) * (n - 1));
      i = Math.max(0, Math.min(n - 1, i));
      cursor.setAttribute('x1', X(xs[i])); cursor.setAttribute('x2', X(xs[i]));
      showLegend(i);
    });
    svg.addEventListener('mouseleave', () => { cursor.setAttribute('x1', -10); cursor.setAttribute('x2', -10); showLegend(null); });
    showLegend(null);
    box.append(svg);
    box.append(legend);
    return box;
  }
  function axMs(v, ax) { return ax ? num(v, v < 10 ? 2 : 1) : dur(v); }
  function axNum(v) { return num(v, v < 10 ? 2 : 1); }
  function niceMax(v) {
    var p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
  }
  function spark(values, cls) {
    var W = 120, H = 24, max = 0, n = values.length;
    values.forEach(v => { if (v != null && v > max) max = v; });
    var svg = sv('svg', { class: 'spark', viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', 'aria-hidden': 'true' });
    if (!n || !max) return svg;
    var d = '', pen = false;
    for (var i = 0; i < n; i++) {
      var v = values[i];
      if (v == null) { pen = false; continue; }
      d += (pen ? 'L' : 'M') + (n === 1 ? 0 : i / (n - 1) * W).toFixed(1) + ' ' + (H - 1 - v / max * (H - 2)).toFixed(1);
      if (!pen && (i + 1 >= n || values[i + 1] == null)) d += 'h2';
      pen = true;
    }
    svg.append(sv('path', { class: 'line ' + (cls || 'l0'), d: d }));
    return svg;
  }

  /* ---------- metrics aggregation ---------- */
  var FAILS = { failed: 1, timed_out: 1, crashed: 1 };
  function newAgg() { return { count: 0, done: 0, fail: 0, rel: 0, rc: 0, rs: 0, r50: 0, r95: 0, wc: 0, w50: 0, w95: 0 }; }
  function addSeries(a, s) {
    var c = s.count || 0;
    a.count += c;
    if (s.outcome === 'done') a.done += c; else if (FAILS[s.outcome]) a.fail += c; else if (s.outcome === 'released') a.rel += c;
    var r = s.runtime_ms, w = s.wait_ms;
    if (r && r.count && r.p50 != null) { a.rc += r.count; a.rs += r.sum || 0; a.r50 += r.p50 * r.count; a.r95 += r.p95 * r.count; }
    if (w && w.count && w.p50 != null) { a.wc += w.count; a.w50 += w.p50 * w.count; a.w95 += w.p95 * w.count; }
  }
  /* Per minute (every minute from..to), grouped by keyFn(series) (null: all). */
  function aggregate(m, keyFn) {
    var n = Math.max(0, (m.to - m.from) + 1), xs = new Array(n), groups = new Map(), total = new Map();
    for (var i = 0; i < n; i++) xs[i] = (m.from + i) * 60000;
    var exact = keyFn ? null : new Array(n);
    (m.minutes || []).forEach(mn => {
      var i = mn.minute - m.from;
      if (i < 0 || i >= n) return;
      if (exact && mn.all) exact[i] = mn.all; /* every series merged by the server: exact percentiles */
      (mn.series || []).forEach(s => {
        var k = keyFn ? keyFn(s) : '';
        var g = groups.get(k);
        if (!g) { g = { key: k, per: new Array(n), sum: newAgg() }; groups.set(k, g); }
        if (!g.per[i]) g.per[i] = newAgg();
        addSeries(g.per[i], s);
        addSeries(g.sum, s);
      });
    });
    if (exact) { if (!groups.get('')) groups.set('', { key: '', per: new Array(n), sum: newAgg() }); groups.get('').all = exact; }
    return { xs: xs, groups: groups };
  }
  function perMinute(g, n, f) { var out = new Array(n); for (var i = 0; i < n; i++) out[i] = g && g.per[i] ? f(g.per[i]) : (f.zero ? 0 : null); return out; }
  function zero(f) { f.zero = true; return f; }
  function avgOr(sum, c) { return c ? sum / c : null; }

  /* ---------- router & polling ---------- */
  var pages = {}, cur = null, ctl = null, timer = null, gen = 0;
  var last = {}; /* url -> time fetched, for slow channels */
  function route() {
    var h = location.hash.replace(/^#\/?/, '');
    var qi = h.indexOf('?'), qs = qi >= 0 ? h.slice(qi + 1) : '';
    if (qi >= 0) h = h.slice(0, qi); /* a page's filters: #/failed?class=... */
    var parts = h.split('/');
    var name = parts[0] || 'overview';
    var arg = parts.length > 1 ? decodeURIComponent(parts.slice(1).join('/')) : null;
    if (name === 'jobs' && arg) name = 'job';
    if (!pages[name]) name = 'overview';
    return { name: name, arg: arg, query: new URLSearchParams(qs), params: new URLSearchParams(qs) };
  }
  function navigate() {
    var r = route();
    gen++;
    authNeeded = false; /* another page may need no token */
    if (!pendingAction) tokenForm.hidden = true; /* asked for the page left; an action's ask stays */
    if (ctl) ctl.abort();
    clearTimeout(timer);
    document.querySelectorAll('#nav a').forEach(a => {
      var on = a.getAttribute('data-page') === (r.name === 'job' ? 'jobs' : r.name);
      a.classList.toggle('active', on);
      if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    });
    cur = { page: pages[r.name], arg: r.arg, query: r.query, state: { params: r.params }, lastText: {} };
    if (cur.page.fromQuery) cur.page.fromQuery(r.query);
    clear(main);
    cur.root = el('div', { id: 'page-' + r.name, class: 'page' });
    main.append(cur.root);
    cur.page.mount(cur.root, cur.state, cur.arg);
    document.title = cur.page.title + ' · qpool';
    last = {};
    refresh(true);
  }
  /* Fetch what's due for the current page and render. force: ignore the cadence. */
  function refresh(force) {
    clearTimeout(timer);
    if (document.visibilityState === 'hidden' || authNeeded) return;
    var my = ++gen, c = cur;
    if (ctl) ctl.abort();
    ctl = typeof AbortController === 'function' ? new AbortController() : null;
    var signal = ctl ? ctl.signal : undefined;
    var now = Date.now(), jobs = [];
    /* What is due: the health pill (every HEALTH ms, on every page) and the
     * page's feeds. A tick sends ONE request, the most overdue, so an open
     * page never polls more than one small request every FAST ms; a forced
     * refresh (page change) fetches everything at once. */
    var due = [];
    if (force || !last.healthz || now - last.healthz >= HEALTH) due.push({ url: 'healthz', health: true, every: HEALTH });
    (c.page.feeds(c.state, c.arg) || []).forEach(f => {
      var every = f.every || FAST;
      if (force || !last[f.url] || now - last[f.url] >= every - 200) due.push(f);
    });
    if (!force && due.length > 1) {
      due.sort((a, b) => ((now - (last[b.url] || 0)) - (b.every || FAST)) - ((now - (last[a.url] || 0)) - (a.every || FAST)));
      due = due.slice(0, 1);
    }
    due.forEach(f => {
      last[f.url] = now;
      if (f.health) {
        jobs.push(get('healthz', signal, [503]).then(r => { setHealth(r.status === 200, r.data); },
          e => { if (e && e.name !== 'AbortError') setHealth(false, { error: e.message }); }));
        return;
      }
      jobs.push(get(f.url, signal, f.allow).then(r => {
        if (c !== cur) return;
        if (c.lastText[f.key || f.url] === r.text && !f.always) { stamp(); return; }
        c.lastText[f.key || f.url] = r.text;
        f.then(r.data, r);
        stamp();
        if (!authNeeded && noticeEl.dataset.kind === 'fetch') { hideNotice(); delete noticeEl.dataset.kind; }
      }, e => {
        if (!e || e.name === 'AbortError' || c !== cur) return;
        /* no Redis at all (qpool.conf names none): asked again at its own pace, said once */
        var noRedis = e.status === 503 && /needs a Redis/.test(e.message || '');
        if (!noRedis) last[f.url] = 0;
        if (f.fail) f.fail(e);
        if (e.status === 401) needsToken(c.root, e.message);
        else if (noRedis) {
          if (noticeEl.dataset.kind !== 'noredis') { notice('No Redis: ' + e.message); noticeEl.dataset.kind = 'noredis'; }
        } else { notice('Could not load ' + f.url + ': ' + (e.message || e)); noticeEl.dataset.kind = 'fetch'; }
      }));
    });
    Promise.all(jobs).then(() => {
      if (c === cur && document.visibilityState !== 'hidden') { clearTimeout(timer); timer = setTimeout(() => { refresh(false); }, FAST); }
    });
  }
  function stamp() { updatedEl.textContent = 'updated ' + new Date().toLocaleTimeString(); }
  var health = { ok: null, data: null };
  function setHealth(ok, data) {
    health.ok = ok; health.data = data;
    renderPill();
  }
  /* overall state: down (healthz fails), degraded (some pools paused / crashing / stale), paused, running */
  var statusInfo = null;
  function overall() {
    if (health.ok === false) return { state: 'down', why: (health.data && (health.data.reason || health.data.error)) || 'healthz failed' };
    if (health.ok == null) return { state: 'unknown', why: '' };
    var st = (health.data && health.data.state) || 'running';
    if (st === 'stopping') return { state: 'degraded', why: 'stopping' };
    if (st === 'paused') return { state: 'paused', why: 'all pools paused' };
    if (statusInfo && statusInfo.degraded.length) return { state: 'degraded', why: statusInfo.degraded.join('; ') };
    return { state: 'running', why: 'healthy' };
  }
  function renderPill() {
    var o = overall();
    pill.className = 'pill s-' + o.state;
    pill.textContent = o.state;
    pill.title = o.why;
  }
  /* crash-loop detection: crashes counted since the previous look (per pool, within 60 s) */
  var crashSeen = {};
  function analyse(st) {
    var deg = [], now = Date.now();
    (st.pools || []).forEach(p => {
      if (p.state === 'draining') return;
      if (p.paused && st.state !== 'paused') deg.push('pool ' + p.name + ' paused');
      var seen = crashSeen[p.name];
      if (!seen || p.crashes < seen.n) crashSeen[p.name] = seen = { n: p.crashes, t: now, hot: 0 };
      else if (p.crashes > seen.n) { seen.hot = now; seen.n = p.crashes; }
      if (seen.hot && now - seen.hot < 60000) deg.push('pool ' + p.name + ' workers crashing (' + num(p.crashes) + ' crashes)');
      if (p.workers < p.target && p.state === 'running' && !p.starting) deg.push('pool ' + p.name + ' below target (' + p.workers + '/' + p.target + ')');
      (p.queues || []).forEach(q => { if (q.laravel_paused) deg.push('queue ' + q.name + ' paused by Laravel (queue:pause)'); });
    });
    (st.paused_queues || []).forEach(q => { deg.push('queue ' + q + ' paused'); });
    (st.paused_classes || []).forEach(c => { deg.push('class ' + c.class + ' paused ' + (c.pool ? 'in pool ' + c.pool + ' ' : '') + 'on every host'); });
    (st.limits || []).forEach(l => { if (l.alerting) deg.push('limit on ' + limitName(l) + ' holding jobs back (alert)'); });
    statusInfo = { degraded: deg };
    renderPill();
  }
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'hidden') { clearTimeout(timer); if (ctl) ctl.abort(); }
    else refresh(false);
  });
  window.addEventListener('hashchange', navigate);

  /* ---------- shared status helpers ---------- */
  function statusFeed(then) { return { url: 'api/status', then: d => { analyse(d); then(d); } }; }
  function sumPools(st, f) { return (st.pools || []).reduce((a, p) => a + (f(p) || 0), 0); }
  /* queues across pools, one entry per name: counts from the first pool listing it, workers summed */
  function queueRows(st) {
    var m = new Map();
    (st.pools || []).forEach(p => {
      (p.queues || []).forEach(q => {
        var r = m.get(q.name);
        if (!r) { r = { name: q.name, ready: q.ready, delayed: q.delayed, reserved: q.reserved, paused: q.paused, laravel_paused: q.laravel_paused, pools: [], workers: 0, busy: 0, wc: 0, w50: 0, w95: 0, wmax: null }; m.set(q.name, r); }
        r.pools.push(p.name); r.workers += p.workers || 0; r.busy += p.busy || 0;
        r.paused = r.paused || q.paused; r.laravel_paused = r.laravel_paused || q.laravel_paused;
      });
      (p.job_stats || []).forEach(s => {
        var r = m.get(s.queue), w = s.wait_ms;
        if (!r || !w || !w.count || w.p50 == null) return;
        r.wc += w.count; r.w50 += w.p50 * w.count; r.w95 += w.p95 * w.count;
        if (r.wmax == null || w.p95 > r.wmax) r.wmax = w.p95;
      });
    });
    return Array.from(m.values());
  }
  function section(root, title, id) {
    var s = el('section', { id: id });
    if (title) s.append(el('h2', { text: title }));
    var body = el('div');
    s.append(body);
    root.append(s);
    return body;
  }
  function card(k, v, sub, id) { return el('div', { class: 'card', id: id }, el('div', { class: 'k', text: k }), el('div', { class: 'v', text: v }), sub ? el('div', { class: 'sub', text: sub }) : null); }
  function seg(options, value, onPick, attr) {
    var s = el('span', { class: 'seg' });
    options.forEach(o => {
      var b = el('button', { type: 'button', class: o[0] === value ? 'on' : null, text: o[1], 'data-range': o[0] });
      b.addEventListener('click', () => { s.querySelectorAll('button').forEach(x => { x.classList.toggle('on', x === b); }); onPick(o[0]); });
      s.append(b);
    });
    return s;
  }
  var RANGE = [[60, '1 h'], [1440, '24 h']];
  var chartRange = 60;

  /* ---------- Overview ---------- */
  pages.overview = {
    title: 'Overview',
    mount: (root, s) => {
      root.append(el('h1', { text: 'Overview' }));
      s.cards = el('div', { class: 'cards', id: 'overview-cards' });
      root.append(s.cards);
      s.hosts = section(root, 'Hosts', 'overview-hosts');
      var h = el('h2', null, 'History ', seg(RANGE, chartRange, v => { chartRange = v; s.charts.dataset.loading = '1'; refresh(true); }));
      root.append(h);
      s.charts = el('div', { class: 'charts', id: 'overview-charts' }, el('div', { class: 'muted', text: 'loading…' }));
      root.append(s.charts);
      s.work = section(root, 'Current workload per queue', 'overview-queues');
    },
    feeds: s => {
      return [
        statusFeed(st => { s.st = st; renderOverview(s); }),
        { url: 'api/fleet', every: SLOW, then: f => { s.fleet = f; renderOverview(s); }, fail: () => { s.fleet = null; } },
        { url: 'api/metrics?minutes=' + chartRange, every: SLOW, then: m => { s.m = m; renderCharts(s); } }
      ];
    }
  };
  function renderOverview(s) {
    var st = s.st;
    if (!st) return;
    var o = overall();
    var jpm = sumPools(st, p => p.jobs_per_min), fpm = sumPools(st, p => p.failed_per_min);
    var busy = sumPools(st, p => p.busy), idle = sumPools(st, p => p.idle);
    var qs = queueRows(st), worst = null;
    if (s.recentWait) worst = s.recentWait;
    else qs.forEach(q => { if (q.wmax != null && (!worst || q.wmax > worst.v)) worst = { q: q.name, v: q.wmax, src: 'p95 since start' }; });
    clear(s.cards);
    add(s.cards, [
      el('div', { class: 'card', id: 'overall-state' }, el('div', { class: 'k', text: 'State (this host)' }), el('div', { class: 'v' }, pillEl(o.state)), el('div', { class: 'sub', text: o.why })),
      card('Jobs / min', num(jpm, 1), num(sumPools(st, p => p.jobs_done)) + ' done since start'),
      card('Failures / min', num(fpm, 1), num(sumPools(st, p => p.jobs_failed)) + ' failed since start'),
      card('Workers', num(st.workers) + ' / ' + num(st.max_workers), num(busy) + ' busy · ' + num(idle) + ' idle (max_workers)'),
      card('Worst queue wait', worst ? dur(worst.v) : '–', worst ? worst.q + ' (' + worst.src + ')' : 'no measured waits'),
      card('Pools', num((st.pools || []).length), num((st.pools || []).filter(p => p.paused).length) + ' paused')
    ]);
    var masters = s.fleet && s.fleet.masters ? s.fleet.masters : [];
    if (!masters.length) masters = [{ id: 'local', host: '(this host)', pid: st.pid, state: st.state, workers: { total: st.workers, busy: busy, idle: idle }, max_workers: st.max_workers, pools: st.pools }];
    put(s.hosts, table('Host|State|#Workers|#Busy|#Idle|#Max|Paused pools',
      masters, m => {
        var local = m.pid === st.pid && (m.config == null || m.config === st.config);
        var state = local ? o.state : hostState(m);
        var pp = (m.pools || []).filter(p => p.paused).map(p => p.name);
        return el('tr', { 'data-host-id': m.id },
          td(el('a', { href: '#/hosts', text: m.host + (local ? ' (this)' : '') })), td(pillEl(state)),
          tdn(num(m.workers && m.workers.total)), tdn(num(m.workers && m.workers.busy)), tdn(num(m.workers && m.workers.idle)), tdn(num(m.max_workers)), td(pp.join(', ') || '–'));
      }));
    put(s.work, table('Queue|Pools|#Ready|#Delayed|#Reserved|#Workers|#Busy|#Wait p50|#Wait p95|State',
      qs, q => {
        return el('tr', { 'data-queue': q.name }, td(q.name), td(q.pools.join(', ')), tdn(num(q.ready)), tdn(num(q.delayed)), tdn(num(q.reserved)), tdn(num(q.workers)), tdn(num(q.busy)),
          tdn(dur(avgOr(q.w50, q.wc))), tdn(dur(avgOr(q.w95, q.wc))), td(queueState(q)));
      }, { empty: 'No queues.' }));
  }
  function hostState(m) {
    if (m.state === 'stopping') return 'degraded';
    if (m.state === 'paused' || m.paused) return 'paused';
    if ((m.pools || []).some(p => p.paused)) return 'degraded';
    return m.state || 'unknown';
  }
  function queueState(q) {
    var f = document.createDocumentFragment();
    if (q.paused) f.append(pillEl('paused', 'paused (qpool)'));
    if (q.laravel_paused) { f.append(document.createTextNode(' ')); f.append(pillEl('paused', 'paused (Laravel queue:pause)')); }
    if (!q.paused && !q.laravel_paused) f.append(pillEl('running'));
    return f;
  }
  function renderCharts(s) {
    var m = s.m;
    var a = aggregate(m, null), n = a.xs.length, g = a.groups.get('');
    /* worst queue by wait over the last 5 minutes */
    var byQ = aggregate(m, x => x.queue), worst = null;
    byQ.groups.forEach(gq => {
      var c = 0, w = 0;
      for (var i = Math.max(0, n - 5); i < n; i++) if (gq.per[i]) { c += gq.per[i].wc; w += gq.per[i].w95; }
      if (c && (!worst || w / c > worst.v)) worst = { q: gq.key, v: w / c, src: 'p95, last 5 min' };
    });
    s.recentWait = worst;
    if (s.st) renderOverview(s);
    clear(s.charts);
    delete s.charts.dataset.loading;
    add(s.charts, charts(g, a.xs, '', ['t', 'r', 'w']));
  }

  /* ---------- Pools ---------- */
  pages.pools = {
    title: 'Pools',
    mount: (root, s) => {
      root.append(el('h1', { text: 'Pools and queues' }));
      root.append(el('p', { class: 'muted', text: 'Scale: a number of workers, or "auto" to hand the pool back to the balancer.' }));
      s.body = el('div', { id: 'pools' });
      s.note = el('p', { class: 'muted' });
      root.append(s.body, s.note);
      pendingForm(root, s);
      classPauseForm(root, s);
    },
    feeds: s => { return [statusFeed(st => { renderPools(s, st); fillQueues(s, st); renderClassPauses(s, st); })]; }
  };
  /* Pause a job class across the fleet (POST api/classes/<class>/pause), and the paused ones with Continue. */
  function classPauseForm(root, s) {
    var b = section(root, 'Paused job classes (every host)', 'class-pauses');
    var f = el('form', { class: 'toolbar', id: 'class-pause-form' });
    s.cpclass = el('input', { type: 'search', id: 'class-pause-class', size: 28, placeholder: 'App\\Jobs\\SyncCrm' });
    s.cppool = el('select', { id: 'class-pause-pool' }, el('option', { value: '', text: 'every pool (the fleet)' }));
    f.append(el('label', null, 'Class', s.cpclass), el('label', null, 'In', s.cppool),
      el('button', { type: 'submit', id: 'class-pause', text: 'Pause class' }));
    f.addEventListener('submit', ev => {
      ev.preventDefault();
      var c = s.cpclass.value.trim(), pool = s.cppool.value;
      if (!c) { notice('Pause class: enter a job class (the payload\'s displayName).'); return; }
      act('Pause class ' + c + (pool ? ' in pool ' + pool : ''), 'api/classes/' + enc(c) + '/pause', pool ? { pool: pool } : {},
        ev.submitter || null).then(() => { s.cpclass.value = ''; });
    });
    s.cplist = el('div', { id: 'class-pause-list' });
    b.append(f, s.cplist);
  }
  function renderClassPauses(s, st) {
    if (!s.cplist) return;
    classPausePools(s, st);
    put(s.cplist, table('Class|Since|By|Host|#Held back|Actions|Pool', st.paused_classes || [], c => {
      return el('tr', { 'data-paused-class': c.class, 'data-paused-pool': c.pool || null },
        td(c.class), td(c.since ? new Date(c.since * 1000).toLocaleString() : '–'), td(c.by || '–'), td(c.host || '–'), tdn(num(c.waiting)),
        td(actBtn('continue', 'Continue', bt => {
          act('Continue class ' + c.class + (c.pool ? ' in pool ' + c.pool : ''), 'api/classes/' + enc(c.class) + '/continue', c.pool ? { pool: c.pool } : {}, bt);
        })), td(c.pool || 'every pool'));
    }, { id: 'class-pause-table', empty: 'No job class is paused.' }));
  }
  /* The pool choices of the class pause form: this host's pools (kept while one is picked). */
  function classPausePools(s, st) {
    var names = (st.pools || []).map(p => { return p.name; }), have = Array.from(s.cppool.options).slice(1).map(o => { return o.value; });
    if (names.join('\n') === have.join('\n')) return;
    var picked = s.cppool.value;
    while (s.cppool.options.length > 1) s.cppool.remove(1);
    names.forEach(n => { s.cppool.append(el('option', { value: n, text: 'pool ' + n })); });
    s.cppool.value = names.indexOf(picked) >= 0 ? picked : '';
  }
  /* Delete a queue's pending jobs that match a filter: the count first (a dry run), then confirm. */
  function pendingForm(root, s) {
    var b = section(root, 'Delete pending jobs', 'pending-delete');
    var f = el('form', { class: 'toolbar', id: 'pending-filter' });
    s.pq = el('select', { id: 'pending-queue' });
    s.pclass = el('input', { type: 'search', id: 'pending-class', size: 22, placeholder: 'App\\Jobs\\…' });
    s.ptext = el('input', { type: 'search', id: 'pending-text', size: 18, placeholder: 'text in the payload' });
    f.append(el('label', null, 'Queue', s.pq), el('label', null, 'Class', s.pclass), el('label', null, 'Text', s.ptext),
      el('button', { type: 'submit', id: 'pending-count', text: 'Count matching' }));
    s.pconfirm = el('div', { id: 'pending-confirm', class: 'btns' });
    f.addEventListener('submit', ev => {
      ev.preventDefault();
      var queue = s.pq.value, body = {};
      if (s.pclass.value.trim()) body.class = s.pclass.value.trim();
      if (s.ptext.value.trim()) body.q = s.ptext.value.trim();
      clear(s.pconfirm);
      if (!queue || !Object.keys(body).length) { notice('Delete pending jobs: pick a queue and a class or a text.'); return; }
      var path = 'api/queues/' + enc(queue) + '/delete';
      postAll(path, Object.assign({ dry_run: true }, body)).then(j => {
        var n = j.matched || 0;
        s.pconfirm.append(el('span', { id: 'pending-confirm-count', 'data-count': String(n),
          text: n ? num(n) + ' pending job' + (n === 1 ? '' : 's') + ' of ' + queue + ' match. Delete them? ' : 'No pending job of ' + queue + ' matches.' }));
        if (n) s.pconfirm.append(actBtn('confirm-delete', 'Confirm delete', bt => {
          clear(s.pconfirm);
          act('Delete the pending jobs of ' + queue + ' matching the filter', path, body, bt);
        }, 'danger'), el('button', { type: 'button', text: 'Cancel', on: { click: () => { clear(s.pconfirm); } } }));
      }, e => {
        if (e.status === 401) askToken('Deleting pending jobs needs the API token.', false);
        notice('Counting the matches failed' + (e.status ? ' (' + e.status + ')' : '') + ': ' + (e.message || String(e)));
      });
    });
    b.append(f, s.pconfirm);
  }
  function fillQueues(s, st) {
    var names = [];
    (st.pools || []).forEach(p => { (p.queues || []).forEach(q => { if (names.indexOf(q.name) < 0) names.push(q.name); }); });
    names.sort();
    var have = Array.prototype.map.call(s.pq.options, o => { return o.value; });
    if (have.join('\n') === names.join('\n')) return;
    var keep = s.pq.value;
    clear(s.pq);
    names.forEach(n => { s.pq.append(el('option', { value: n, text: n })); });
    if (names.indexOf(keep) >= 0) s.pq.value = keep;
  }
  function actBtn(action, label, fn, cls) {
    return el('button', { type: 'button', 'data-action': action, class: cls, text: label, on: { click: ev => { fn(ev.currentTarget); } } });
  }
  function renderPools(s, st) {
    /* keep what the user typed in the scale inputs, and the focus */
    var kept = {}, focus = null;
    s.body.querySelectorAll('input[data-scale]').forEach(i => { kept[i.getAttribute('data-scale')] = i.value; if (i === document.activeElement) focus = i.getAttribute('data-scale'); });
    var cols = 'Pool / queue|State|Actions|Kind|#Workers|#Target|Min–max|#Busy|#Idle|#Ready|#Delayed|#Reserved|#Jobs/min|#Failed/min|#Done|#Failed|#Crashes';
    var rows = [];
    (st.pools || []).forEach(p => { rows.push({ p: p }); (p.queues || []).forEach(q => { rows.push({ p: p, q: q }); }); });
    var t = table(cols, rows, r => {
      var p = r.p, q = r.q, pn = enc(p.name);
      if (q) {
        var qn = enc(q.name);
        return el('tr', { class: 'sub', 'data-queue': q.name, 'data-queue-pool': p.name },
          td('↳ ' + q.name), td(queueState(q)),
          td(el('div', { class: 'btns' },
            q.paused ? actBtn('continue', 'Continue', b => { act('Continue queue ' + q.name, 'api/queues/' + qn + '/continue', {}, b); })
              : actBtn('pause', 'Pause', b => { act('Pause queue ' + q.name, 'api/queues/' + qn + '/pause', {}, b); }),
            q.laravel_paused ? el('span', { class: 'muted', text: 'Laravel paused: php artisan queue:continue' }) : null)),
          td('queue'), td(''), td(''), td(''), td(''), td(''),
          tdn(num(q.ready)), tdn(num(q.delayed)), tdn(num(q.reserved)), td(''), td(''), td(''), td(''), td(''));
      }
      var inp = el('input', { type: 'text', inputmode: 'numeric', 'data-scale': p.name, placeholder: p.balance === 'auto' ? 'auto' : String(p.target), 'aria-label': 'workers for ' + p.name, size: 4 });
      if (kept[p.name] != null) inp.value = kept[p.name];
      var doScale = b => {
        var v = inp.value.trim().toLowerCase();
        if (!v) { notice('Scale ' + p.name + ': enter a number of workers or "auto".'); inp.focus(); return; }
        var n = v === 'auto' ? 'auto' : Number(v);
        if (n !== 'auto' && !(Number.isInteger(n) && n >= 0)) { notice('Scale ' + p.name + ': "' + v + '" is neither a whole number nor "auto".'); return; }
        act('Scale ' + p.name + ' to ' + n, 'api/pools/' + pn + '/scale', { n: n }, b).then(() => { inp.value = ''; });
      };
      inp.addEventListener('keydown', ev => { if (ev.key === 'Enter') doScale(null); });
      var pinned = p.pinned != null ? ' (pinned ' + p.pinned + ')' : '';
      var fb = p.fleet_budget ? el('div', { class: 'muted', 'data-budget': p.name, text: budgetText(p.fleet_budget) }) : null;
      return el('tr', { 'data-pool': p.name, class: 'pool' },
        td(el('strong', { text: p.name })), td(pillEl(p.state)),
        td(el('div', { class: 'btns' },
          p.paused ? actBtn('continue', 'Continue', b => { act('Continue ' + p.name, 'api/pools/' + pn + '/continue', {}, b); })
            : actBtn('pause', 'Pause', b => { act('Pause ' + p.name, 'api/pools/' + pn + '/pause', {}, b); }),
          inp, actBtn('scale', 'Scale', doScale),
          actBtn('restart', 'Rolling restart', b => { act('Rolling restart of ' + p.name, 'api/pools/' + pn + '/restart', {}, b); }))),
        td(p.kind + ' · ' + p.balance), tdn(num(p.workers)), tdn(num(p.target) + pinned), td(fb ? el('span', null, num(p.min) + '–' + num(p.max), fb) : num(p.min) + '–' + num(p.max)),
        tdn(num(p.busy)), tdn(num(p.idle)),
        tdn(num(sumQ(p, 'ready'))), tdn(num(sumQ(p, 'delayed'))), tdn(num(sumQ(p, 'reserved'))),
        tdn(num(p.jobs_per_min, 1)), tdn(num(p.failed_per_min, 1)), tdn(num(p.jobs_done)), tdn(num(p.jobs_failed)), tdn(num(p.crashes)));
    }, { id: 'pools-table', empty: 'No pools.' });
    put(s.body, t);
    if (focus) { var f = s.body.querySelector('input[data-scale="' + cssEsc(focus) + '"]'); if (f) { f.focus(); var l = f.value.length; try { f.setSelectionRange(l, l); } catch (e) { /* ignore */ } } }
    s.note.textContent = st.paused_queues && st.paused_queues.length ? 'Queues paused in qpool: ' + st.paused_queues.join(', ') : '';
  }
  function sumQ(p, k) { return (p.queues || []).reduce((a, q) => a + (q[k] || 0), 0); }
  function cssEsc(s) { return window.CSS && CSS.escape ? CSS.escape(s) : s.replace(/["\\]/g, '\\$&'); }

  /* ---------- Workers ---------- */
  pages.workers = {
    title: 'Workers',
    mount: (root, s) => {
      root.append(el('h1', { text: 'Workers' }));
      s.local = section(root, 'This host', 'workers-local');
      s.other = section(root, 'Other hosts (from the fleet heartbeats)', 'workers-fleet');
    },
    feeds: s => {
      return [statusFeed(st => { s.st = st; renderWorkers(s); }),
        { url: 'api/fleet', every: SLOW, then: f => { s.fleet = f; renderWorkers(s); } }];
    }
  };
  function renderWorkers(s) {
    var st = s.st;
    if (st && st.aggregates_only) {
      var why = 'Each worker and the job it runs need the API token.';
      clear(s.local);
      needsToken(s.local, why);
      if (!s.asked) { s.asked = true; askToken(why); }
    } else if (st) {
      var rows = [];
      (st.pools || []).forEach(p => { (p.children || []).forEach(c => { rows.push({ p: p, c: c }); }); });
      put(s.local, table('Pool|#Slot|#PID|State|Current job|Queue|#Running for|#Jobs done|#Failed|#Memory|#Up|#Restarts|Last exit|Notes',
        rows, r => {
          var c = r.c, j = c.job, z = r.p.zygote;
          // a forked handler's memory is its own (USS); the zygote's shows once, on its pool's first row
          var zygote = z && z.pid && r === rows.find(x => x.p === r.p) ? 'zygote ' + z.pid + ': ' + kb(z.pss_kb) + ' PSS' : null;
          var notes = [c.old_generation ? 'old generation (restarting)' : null, c.native === false ? 'command worker' : null,
            c.memory === 'rss+uss' ? 'handler forked (memory: RSS + its USS)' : null, zygote].filter(Boolean).join(', ');
          return el('tr', { 'data-pid': c.pid, 'data-pool': r.p.name, class: 'worker' },
            td(r.p.name), tdn(num(c.slot)), tdn(String(c.pid)), td(pillEl(c.state)),
            td(j ? el('span', { class: 'mono', title: 'job id ' + (j.id || ''), text: j.name || j.id || '?' }) : '–', 'x'),
            td(j ? j.queue : '–'), tdn(j ? dur(j.running_ms) : '–'),
            tdn(num(c.jobs_done)), tdn(num(c.jobs_failed)), tdn(kb(c.rss_kb)), tdn(c.uptime_s != null ? dur(c.uptime_s * 1000) : '–'),
            tdn(c.restarts != null ? num(c.restarts) : '–'), td(c.last_exit != null ? (typeof c.last_exit === 'object' ? JSON.stringify(c.last_exit) : String(c.last_exit)) : (c.last_exit_reason || '–')),
            td(notes || ''));
        }, { id: 'workers-table', empty: 'No workers.' }));
    }
    var f = s.fleet;
    clear(s.other);
    if (!f) { s.other.append(el('p', { class: 'muted', text: 'loading…' })); return; }
    var others = (f.masters || []).filter(m => !st || m.pid !== st.pid || m.config !== st.config);
    if (!others.length) { s.other.append(el('p', { class: 'muted', text: 'No other masters on this Redis connection.' })); return; }
    var rows2 = [];
    others.forEach(m => {
      if (m.children) m.children.forEach(c => { rows2.push({ m: m, c: c }); });
      else (m.pools || []).forEach(p => { rows2.push({ m: m, p: p }); });
    });
    s.other.append(table('Host|Pool|#PID / workers|State / busy|Current job|#Jobs done|#RSS',
      rows2, r => {
        if (r.c) {
          var c = r.c;
          return el('tr', { 'data-host-id': r.m.id, 'data-pid': c.pid }, td(r.m.host), td(c.pool || '–'), tdn(String(c.pid)), td(pillEl(c.state || '?')),
            td(c.job ? (c.job.name || '') + ' (' + dur(c.job.running_ms) + ')' : '–'), tdn(num(c.jobs_done)), tdn(kb(c.rss_kb)));
        }
        return el('tr', { 'data-host-id': r.m.id }, td(r.m.host), td(r.p.name), tdn(num(r.p.workers) + ' / ' + num(r.p.target)),
          td(num(r.p.busy) + ' busy' + (r.p.paused ? ' · paused' : '')), td('(per-worker detail not in the fleet heartbeat)', 'muted'), tdn('–'), tdn('–'));
      }));
  }

  /* ---------- Jobs ---------- */
  var OUTCOMES = ['', 'done', 'released', 'failed', 'timed_out', 'crashed'];
  var JOB_FILTER_DEFAULT = { queue: '', pool: '', name: '', outcome: '', silenced: '', tag: '', host: '', uuid: '', attempt: '', q: '', since: '', until: '', limit: '100' };
  var jobsHeading = 'Recent jobs';
  var jobFilter = Object.assign({}, JOB_FILTER_DEFAULT);
  /* The filter lives in the URL (#/jobs?tag=...): bookmarkable, and the back button goes to the previous one. */
  function jobsHash(f) {
    var q = new URLSearchParams();
    Object.keys(JOB_FILTER_DEFAULT).forEach(k => { if (f[k] && f[k] !== JOB_FILTER_DEFAULT[k]) q.set(k, f[k]); });
    var t = q.toString();
    return '#/jobs' + (t ? '?' + t : '');
  }
  pages.jobs = {
    title: 'Jobs',
    fromQuery: query => {
      jobsHeading = 'Recent jobs';
      Object.keys(JOB_FILTER_DEFAULT).forEach(k => { jobFilter[k] = query.get(k) || JOB_FILTER_DEFAULT[k]; });
    },
    mount: (root, s) => {
      root.append(el('h1', { text: jobsHeading }));
      var form = el('form', { class: 'toolbar', id: 'jobs-filter' });
      function field(k, label, input) {
        input.name = k; input.value = jobFilter[k];
        input.addEventListener('change', apply);
        form.append(el('label', null, label, input));
        return input;
      }
      s.dl = { queue: el('datalist', { id: 'dl-queue' }), pool: el('datalist', { id: 'dl-pool' }), name: el('datalist', { id: 'dl-name' }) };
      field('queue', 'Queue', el('input', { type: 'search', list: 'dl-queue', size: 10 }));
      field('pool', 'Pool', el('input', { type: 'search', list: 'dl-pool', size: 10 }));
      field('name', 'Class', el('input', { type: 'search', list: 'dl-name', size: 22, placeholder: 'App\\Jobs\\…' }));
      var sel = el('select');
      OUTCOMES.forEach(o => { sel.append(el('option', { value: o, text: o || 'any' })); });
      field('outcome', 'Outcome', sel);
      var sil = el('select');
      [['', 'any'], ['false', 'hidden'], ['true', 'only']].forEach(o => { sil.append(el('option', { value: o[0], text: o[1] })); });
      field('silenced', 'Silenced', sil);
      field('tag', 'Tag', el('input', { type: 'search', size: 16, placeholder: 'App\\Models\\User:1' }));
      field('q', 'Text', el('input', { type: 'search', size: 14, placeholder: 'in exception / payload' }));
      field('host', 'Host', el('input', { type: 'search', size: 10 }));
      field('uuid', 'UUID', el('input', { type: 'search', size: 12 }));
      field('attempt', 'Attempt', el('input', { type: 'search', inputmode: 'numeric', pattern: '[0-9]*', size: 4 }));
      field('since', 'Since', el('input', { type: 'datetime-local', step: 1 }));
      field('until', 'Until', el('input', { type: 'datetime-local', step: 1 }));
      var lim = el('select');
      ['100', '500', '1000'].forEach(o => { lim.append(el('option', { value: o, text: o })); });
      field('limit', 'Limit', lim);
      form.append(el('button', { type: 'button', text: 'Clear', on: { click: () => { location.hash = jobsHash(JOB_FILTER_DEFAULT); } } }));
      s.live = el('input', { type: 'checkbox', checked: true, id: 'jobs-live' });
      form.append(el('label', null, s.live, 'live'));
      form.addEventListener('submit', ev => { ev.preventDefault(); apply(); });
      function apply() {
        Array.prototype.forEach.call(form.elements, i => { if (i.name) jobFilter[i.name] = i.value; });
        var h = jobsHash(jobFilter);
        if (location.hash !== h) location.hash = h; /* a new history entry; hashchange remounts */
        else refresh(true);
      }
      root.append(form);
      add(root, [s.dl.queue, s.dl.pool, s.dl.name]);
      s.count = el('p', { class: 'muted', id: 'jobs-count' });
      root.append(s.count);
      s.body = el('div', { id: 'jobs' });
      root.append(s.body);
      s.known = { queue: new Set(), pool: new Set(), name: new Set() };
    },
    feeds: s => {
      var q = [];
      ['queue', 'pool', 'name', 'outcome', 'silenced', 'tag', 'q', 'host', 'uuid', 'attempt'].forEach(k => { if (jobFilter[k]) q.push(k + '=' + enc(jobFilter[k])); });
      ['since', 'until'].forEach(k => { if (jobFilter[k]) { var t = new Date(jobFilter[k]).getTime(); if (t === t) q.push(k + '=' + t); } });
      q.push('limit=' + enc(jobFilter.limit || '100'));
      var url = 'api/jobs/recent?' + q.join('&');
      if (s.live && !s.live.checked && s.lastUrl === url) return [];
      s.lastUrl = url;
      return [{ url: url, key: 'jobs', then: d => { renderJobs(s, d.jobs || []); } }];
    }
  };
  /* Horizon's Completed and Silenced lists: the Jobs page with a filter of its own. */
  function jobsPreset(title, preset) {
    return Object.assign({}, pages.jobs, {
      title: title,
      fromQuery: query => {
        pages.jobs.fromQuery(query);
        Object.keys(preset).forEach(k => { if (!query.get(k)) jobFilter[k] = preset[k]; });
        jobsHeading = title;
      }
    });
  }
  pages.completed = jobsPreset('Completed jobs', { outcome: 'done', silenced: 'false' });
  pages.silenced = jobsPreset('Silenced jobs', { silenced: 'true' });
  /* Each tag a link to the jobs with it (text only: a tag is never markup). */
  function tagLinks(tags) {
    var span = el('span', { class: 'tags' });
    (tags || []).forEach((t, i) => {
      if (i) span.append(' ');
      span.append(el('a', { href: jobsHash(Object.assign({}, JOB_FILTER_DEFAULT, { tag: t })), class: 'tag', text: t }));
    });
    return span;
  }
  function renderJobs(s, jobs) {
    ['queue', 'pool', 'name'].forEach(k => {
      jobs.forEach(j => {
        if (j[k] && !s.known[k].has(j[k]) && s.known[k].size < 500) { s.known[k].add(j[k]); s.dl[k].append(el('option', { value: j[k] })); }
      });
    });
    s.count.textContent = num(jobs.length) + ' attempt' + (jobs.length === 1 ? '' : 's') + ', newest first (by finish time)';
    s.tableEl = table('Finished|Job|Outcome|Queue|Pool|Host|Worker|#Attempt|#Wait|#Runtime|Tags|Exception',
      jobs, j => {
        var tr = el('tr', { 'data-uuid': j.uuid || '', class: 'job' },
          td(when(j.finished_at)), td(jobLink(j.uuid, j.name || j.uuid || '?'), 'x'), td(j.silenced ? [pillEl(j.outcome), ' ', pillEl('silenced')] : pillEl(j.outcome)), td(j.queue), td(j.pool), td(j.host),
          td(j.worker ? j.worker + (j.pid ? ' (' + j.pid + ')' : '') : '–'), tdn(num(j.attempt)),
          tdn(dur(j.wait_ms)), tdn(dur(j.runtime_ms)), td(tagLinks(j.tags)), td(j.exception || '', 'x', j.exception || null));
        return tr;
      }, { id: 'jobs-table', empty: 'No jobs match.', keepShown: shownIn(s.body) });
    put(s.body, s.tableEl);
  }

  /* ---------- monitored tags ---------- */
  var monTag = '';
  /* A tag's lists take the Jobs page's filters (GET /api/monitoring/jobs), kept in the URL. */
  var MFILTER = ['class', 'queue', 'pool', 'host', 'status', 'q', 'since', 'until'], monFilter = {};
  function monitoringHash(tag, f) { return '#/monitoring' + (tag ? '?' + new URLSearchParams(Object.assign({ tag: tag }, f || {})).toString() : ''); }
  function monitorQuery(skip) {
    var q = ['tag=' + enc(monTag)];
    MFILTER.forEach(k => {
      var v = monFilter[k];
      if (!v || k === skip) return;
      if (k === 'since' || k === 'until') { var t = new Date(v).getTime(); if (t === t) q.push(k + '=' + t); } else q.push(k + '=' + enc(v));
    });
    return 'api/monitoring/jobs?' + q.join('&') + '&limit=100';
  }
  function monitorFilterForm() {
    var form = el('form', { class: 'toolbar', id: 'monitor-filter' }), inputs = {};
    function field(k, label, input) { input.name = k; input.value = monFilter[k] || ''; form.append(el('label', null, label, input)); inputs[k] = input; }
    field('class', 'Class', el('input', { type: 'search', id: 'monitor-class', size: 22, placeholder: 'App\\Jobs\\…' }));
    field('queue', 'Queue', el('input', { type: 'search', id: 'monitor-queue', size: 10 }));
    field('pool', 'Pool', el('input', { type: 'search', id: 'monitor-pool', size: 10 }));
    field('host', 'Host', el('input', { type: 'search', id: 'monitor-host', size: 10 }));
    var sel = el('select', { id: 'monitor-status' });
    OUTCOMES.forEach(o => { sel.append(el('option', { value: o, text: o || 'any' })); });
    field('status', 'Outcome', sel);
    field('q', 'Text', el('input', { type: 'search', id: 'monitor-q', size: 14, placeholder: 'in exception / payload' }));
    field('since', 'Since', el('input', { type: 'datetime-local', step: 1, id: 'monitor-since' }));
    field('until', 'Until', el('input', { type: 'datetime-local', step: 1, id: 'monitor-until' }));
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      var f = {};
      MFILTER.forEach(k => { var v = inputs[k].value.trim(); if (v) f[k] = v; });
      var h = monitoringHash(monTag, f);
      if (location.hash === h) refresh(true); else location.hash = h;
    });
    form.append(el('button', { type: 'submit', id: 'monitor-go', text: 'Filter' }),
      el('button', { type: 'button', text: 'Clear', on: { click: () => { location.hash = monitoringHash(monTag); } } }));
    return form;
  }
  function tagJobsTable(jobs, id) {
    return table('Finished|Job|Outcome|Queue|Host|#Attempt|#Runtime|Tags|Exception', jobs, j => {
      return el('tr', { 'data-uuid': j.uuid || '', class: 'job' }, td(when(j.finished_at)), td(jobLink(j.uuid, j.name || j.uuid || '?'), 'x'),
        td(pillEl(j.outcome)), td(j.queue), td(j.host), tdn(num(j.attempt)), tdn(dur(j.runtime_ms)), td(tagLinks(j.tags)),
        td(j.exception || '', 'x', j.exception || null));
    }, { id: id, empty: 'No jobs kept for this tag yet.' });
  }
  pages.monitoring = {
    title: 'Monitoring',
    fromQuery: query => {
      monTag = query.get('tag') || '';
      monFilter = {};
      MFILTER.forEach(k => { var v = query.get(k); if (v) monFilter[k] = v; });
    },
    mount: (root, s) => {
      root.append(el('h1', { text: 'Monitored tags' }));
      var input = el('input', { type: 'search', id: 'monitor-tag', size: 30, placeholder: 'App\\Models\\User:42', maxlength: 120 });
      var form = el('form', { class: 'toolbar', id: 'monitor-form' }, el('label', null, 'Tag', input),
        el('button', { type: 'submit', 'data-action': 'monitor', text: 'Monitor' }));
      form.addEventListener('submit', ev => {
        ev.preventDefault();
        var t = input.value.trim();
        if (t) act('Monitor ' + t, 'api/monitoring', { tag: t }, null);
      });
      root.append(form);
      root.append(el('p', { class: 'muted', text: 'A watched tag\'s jobs are kept apart from the recent jobs (monitored_tag_jobs per tag, for monitored_tag_retention).' }));
      s.list = el('div', { id: 'monitoring' });
      root.append(s.list);
      if (monTag) {
        root.append(monitorFilterForm());
        s.recent = section(root, 'Recent jobs tagged ' + monTag, 'monitor-recent');
        s.failed = section(root, 'Failed jobs tagged ' + monTag, 'monitor-failed');
      }
    },
    feeds: s => {
      var f = [{ url: 'api/monitoring', then: d => { renderMonitoring(s, d.tags || []); } }];
      if (monTag) {
        f.push({ url: monitorQuery(), key: 'recent', then: d => { put(s.recent, tagJobsTable(d.jobs || [], 'monitor-recent-table')); } });
        f.push({ url: monitorQuery('status') + '&outcome=failed', key: 'failed', then: d => { put(s.failed, tagJobsTable(d.jobs || [], 'monitor-failed-table')); } });
      }
      return f;
    }
  };
  function renderMonitoring(s, tags) {
    put(s.list, table('Tag|#Jobs kept|Actions', tags, t => {
      return el('tr', { 'data-tag': t.tag, class: t.tag === monTag ? 'selected' : null },
        td(el('a', { href: monitoringHash(t.tag), text: t.tag })), tdn(num(t.jobs)),
        td(actBtn('unmonitor', 'Stop monitoring', b => { act('Stop monitoring ' + t.tag, 'api/monitoring', { tag: t.tag }, b, 'DELETE'); }, 'danger')));
    }, { id: 'monitoring-table', empty: 'No tag is monitored.' }));
  }

  /* ---------- one job ---------- */
  pages.job = {
    title: 'Job',
    mount: (root, s, uuid) => {
      root.append(el('p', null, el('a', { href: '#/jobs', text: '← recent jobs' })));
      s.h = el('h1', null, el('span', { id: 'job-name', text: uuid }));
      root.append(s.h);
      s.body = el('div', { id: 'job' }, el('p', { class: 'muted', text: 'loading…' }));
      root.append(s.body);
    },
    feeds: (s, uuid) => {
      return [{ url: 'api/jobs/' + enc(uuid), every: 5000, then: d => { renderJob(s, uuid, d); },
        fail: e => {
          if (e.status === 404) clear(s.body).append(el('p', { class: 'empty', text: 'No job ' + uuid + ' in the job history or the failed store.' }));
          else if (e.status === 401) clear(s.body);
        } }];
    }
  };
  function renderJob(s, uuid, d) {
    var p = null, perr = null;
    if (d.payload) { try { p = JSON.parse(d.payload); } catch (e) { perr = e.message; } }
    var at = d.attempts || [], a0 = at[0] || {}, f = d.failed;
    var name = (p && (p.displayName || p.job)) || a0.name || (f && f.name) || uuid;
    document.getElementById('job-name').textContent = name;
    var b = clear(s.body);
    var kv = el('dl', { class: 'kv', id: 'job-summary' });
    function row(k, v) { if (v != null && v !== '') kv.append(el('dt', { text: k })), kv.append(el('dd', null, v)); }
    row('UUID', uuid);
    row('State', f ? pillEl('failed', 'in the failed store') : a0.outcome ? pillEl(a0.outcome, 'last attempt: ' + a0.outcome) : null);
    row('Queue', a0.queue || (f && f.queue));
    if (a0.tags && a0.tags.length) row('Tags', tagLinks(a0.tags));
    row('Pool', a0.pool);
    row('Attempts', at.length ? num(a0.attempt || at.length) + (p && p.maxTries ? ' of ' + p.maxTries : '') : (p && p.attempts != null ? num(p.attempts) : null));
    row('Host / worker', a0.host ? a0.host + ' · ' + (a0.worker || '?') + (a0.pid ? ' (pid ' + a0.pid + ')' : '') : null);
    row('Wait (last attempt)', a0.uuid ? dur(a0.wait_ms) + (a0.wait_ms == null ? ' (not measured)' : '') : null);
    row('Runtime (last attempt)', a0.uuid ? dur(a0.runtime_ms) : null);
    row('Started / finished', a0.started_at ? when(a0.started_at) + ' → ' + when(a0.finished_at) : null);
    if (p && p.timeout != null) row('Timeout', num(p.timeout) + ' s');
    if (p && p.pushedAt) row('Pushed at', String(p.pushedAt));
    if (p && p.createdAt) row('Created at', when(p.createdAt * 1000));
    b.append(kv);
    if (f) {
      var fb = section(b, 'Failed', 'job-failed');
      fb.append(el('div', { class: 'toolbar' },
        el('span', { text: 'Failed at ' + when(f.failed_at * 1000) + ' on connection ' + (f.connection || '?') + ', queue ' + f.queue }),
        actBtn('retry', 'Retry', bt => { act('Retry ' + uuid, 'api/failed/' + enc(uuid) + '/retry', {}, bt); }),
        actBtn('forget', 'Forget', bt => { act('Forget ' + uuid, 'api/failed/' + enc(uuid) + '/forget', {}, bt); }, 'danger')));
      fb.append(el('pre', { id: 'job-exception', text: f.exception || '' }));
    }
    var ab = section(b, 'Attempts (newest first)', 'job-attempts');
    ab.append(table('#Attempt|Outcome|Started|#Wait|#Runtime|Host|Worker|Exception',
      at, x => {
        return el('tr', null, tdn(num(x.attempt)), td(pillEl(x.outcome)), td(when(x.started_at)), tdn(dur(x.wait_ms)), tdn(dur(x.runtime_ms)), td(x.host), td((x.worker || '') + (x.pid ? ' (' + x.pid + ')' : '')), td(x.exception || '', 'wrap'));
      }, { empty: 'No attempts in the job history.' }));
    var cmd = p && p.data && typeof p.data.command === 'string' ? p.data.command : null;
    if (cmd != null) {
      var cb = section(b, 'Command' + (p.data.commandName ? ' (' + p.data.commandName + ')' : ''), 'job-command');
      var box = el('div', { class: 'treebox', id: 'job-command-tree' });
      if (!/^[OC]:\d/.test(cmd)) box.append(el('p', { class: 'muted', text: 'encrypted (the job implements ShouldBeEncrypted; its properties are not readable here)' }));
      else {
        try { box.append(phpTree(unserialize(cmd))); } catch (e) {
          box.append(el('p', { class: 'muted', text: 'Could not parse the serialized command (' + e.message + '); raw:' }));
          box.append(el('pre', { text: cmd }));
        }
      }
      cb.append(box);
    }
    var pb = section(b, 'Payload' + (d.payload_source ? ' (from ' + d.payload_source.replace('_', ' ') + ')' : ''), 'job-payload-section');
    var pre = el('pre', { id: 'job-payload' });
    if (d.payload == null) pre.textContent = 'The payload is not kept for this job (done jobs keep none unless job_history_payloads = true).';
    else pre.textContent = p ? JSON.stringify(p, null, 2) : d.payload;
    if (perr) pb.append(el('p', { class: 'muted', text: 'Not valid JSON (' + (a0.payload_truncated ? 'truncated past 16 KB' : perr) + '); raw text:' }));
    pb.append(pre);
  }

  /* ---------- PHP unserialize (safe: builds plain data, runs nothing) ---------- */
  function unserialize(input) {
    var b = new TextEncoder().encode(input), pos = 0, dec = new TextDecoder('utf-8'), nodes = 0;
    function fail(m) { throw new Error(m + ' at byte ' + pos); }
    function expect(c) { if (b[pos] !== c.charCodeAt(0)) fail('expected "' + c + '"'); pos++; }
    function until(c) {
      var cc = c.charCodeAt(0), s = pos;
      while (pos < b.length && b[pos] !== cc) pos++;
      if (pos >= b.length) fail('unterminated');
      var out = dec.decode(b.subarray(s, pos)); pos++; return out;
    }
    function int(c) { var v = until(c); if (!/^[+-]?\d+$/.test(v)) fail('bad integer'); return parseInt(v, 10); }
    function str(len) {
      if (len < 0 || pos + len > b.length) fail('string length');
      expect('"'); var s = dec.decode(b.subarray(pos, pos + len)); pos += len; expect('"'); return s;
    }
    function value(depth) {
      if (depth > 64) fail('nested too deep');
      if (++nodes > 20000) fail('too many values');
      var t = String.fromCharCode(b[pos]); pos++;
      if (t === 'N') { expect(';'); return { t: 'null' }; }
      expect(':');
      switch (t) {
        case 'b': return { t: 'bool', v: int(';') !== 0 };
        case 'i': return { t: 'int', v: until(';') };
        case 'd': return { t: 'float', v: until(';') };
        case 's': { var s = str(int(':')); expect(';'); return { t: 'string', v: s }; }
        case 'S': { var s2 = str(int(':')); expect(';'); return { t: 'string', v: s2 }; }
        case 'r': case 'R': return { t: 'ref', v: int(';') };
        case 'E': { var e = str(int(':')); expect(';'); return { t: 'enum', v: e }; }
        case 'a': return { t: 'array', items: members(int(':'), depth, false) };
        case 'O': { var cls = str(int(':')); expect(':'); return { t: 'object', cls: cls, items: members(int(':'), depth, true) }; }
        case 'C': {
          var cc = str(int(':')); expect(':'); var n = int(':'); expect('{');
          if (pos + n > b.length) fail('length'); var raw = dec.decode(b.subarray(pos, pos + n)); pos += n; expect('}');
          return { t: 'custom', cls: cc, v: raw };
        }
        default: pos--; fail('unknown type "' + t + '"');
      }
    }
    function members(n, depth, obj) {
      if (n < 0 || n > 100000) fail('count');
      expect('{');
      var out = [];
      for (var i = 0; i < n; i++) {
        var k = value(depth + 1);
        if (k.t !== 'int' && k.t !== 'string') fail('bad key');
        var key = String(k.v), vis = null;
        if (obj && key.charCodeAt(0) === 0) {
          var j = key.indexOf('\0', 1);
          vis = key.slice(1, j) === '*' ? 'protected' : 'private ' + key.slice(1, j);
          key = key.slice(j + 1);
        }
        out.push({ k: key, kt: k.t, vis: vis, v: value(depth + 1) });
      }
      expect('}');
      return out;
    }
    var v = value(0);
    if (pos !== b.length) fail('trailing data');
    return v;
  }
  function phpTree(v) {
    var ul = el('ul', { class: 'tree' });
    ul.append(phpNode(null, v));
    return ul;
  }
  function phpNode(m, v) {
    var li = el('li');
    if (m) {
      li.append(el('span', { class: 'k', text: m.k }));
      if (m.vis) li.append(el('span', { class: 't', text: ' (' + m.vis + ')' }));
      li.append(document.createTextNode(': '));
    }
    switch (v.t) {
      case 'null': li.append(el('span', { class: 't', text: 'null' })); break;
      case 'bool': li.append(el('span', { class: 'num', text: v.v ? 'true' : 'false' })); break;
      case 'int': case 'float': li.append(el('span', { class: 'num', text: v.v })); break;
      case 'string': li.append(el('span', { class: 's', text: JSON.stringify(v.v) })); break;
      case 'enum': li.append(el('span', { class: 'cls', text: v.v })); li.append(el('span', { class: 't', text: ' (enum)' })); break;
      case 'ref': li.append(el('span', { class: 't', text: '(reference to value #' + v.v + ')' })); break;
      case 'custom': li.append(el('span', { class: 'cls', text: v.cls })); li.append(el('span', { class: 's', text: ' ' + JSON.stringify(v.v) })); break;
      default: {
        li.append(v.t === 'object' ? el('span', { class: 'cls', text: v.cls }) : el('span', { class: 't', text: 'array(' + v.items.length + ')' }));
        if (v.t === 'object' && v.cls === 'Illuminate\\Contracts\\Database\\ModelIdentifier') li.append(el('span', { class: 't', text: ' (model reference)' }));
        if (v.items.length) {
          var ul = el('ul', { class: 'tree' });
          v.items.forEach(x => { ul.append(phpNode(x, x.v)); });
          li.append(ul);
        } else li.append(el('span', { class: 't', text: v.t === 'object' ? ' {}' : ' []' }));
      }
    }
    return li;
  }

  /* ---------- Running now ---------- */
  pages.running = {
    title: 'Running now',
    mount: (root, s) => {
      root.append(el('h1', { text: 'Running now' }));
      root.append(el('p', { class: 'muted', text: "Every job running on every host writing to this Redis (with no Redis: this host's alone), oldest first, as of each master's last heartbeat. Stop ends a job of this host's master as its timeout would: it is released or failed by its tries." }));
      s.filter = runningFilterOf(s.params);
      root.append(runningFilterForm(s));
      s.count = el('p', { class: 'muted', id: 'running-count' });
      root.append(s.count);
      s.body = el('div', { id: 'running' });
      root.append(s.body);
    },
    feeds: s => { return [{ url: runningUrl(s.filter), then: d => { renderRunning(s, d.running || []); } }]; }
  };
  /* The Running page's filters (GET /api/jobs/running takes them), kept in
   * the URL (#/running?class=...&status=past_timeout): bookmarkable, back works. */
  var RFILTER = ['class', 'queue', 'pool', 'host', 'tag', 'status'];
  /* A running job's tags, each a link to the running jobs with that tag. */
  function runningTags(tags) {
    var span = el('span', { class: 'tags' });
    (tags || []).forEach(t => { span.append(el('a', { href: '#/running?' + new URLSearchParams({ tag: t }).toString(), text: t }), ' '); });
    return span;
  }
  function runningFilterOf(params) {
    var f = {};
    RFILTER.forEach(k => { var v = params.get(k); if (v) f[k] = v; });
    return f;
  }
  function runningUrl(f) {
    var qs = new URLSearchParams(f).toString();
    return 'api/jobs/running' + (qs ? '?' + qs : '');
  }
  function runningFilterForm(s) {
    var form = el('form', { class: 'toolbar', id: 'running-filter' }), inputs = {};
    function field(k, label, input) {
      input.name = k;
      input.value = s.filter[k] || '';
      form.append(el('label', null, label, input));
      inputs[k] = input;
    }
    field('class', 'Class', el('input', { type: 'search', id: 'running-class', size: 22, placeholder: 'App\\Jobs\\…' }));
    field('queue', 'Queue', el('input', { type: 'search', id: 'running-queue', size: 12 }));
    field('pool', 'Pool', el('input', { type: 'search', id: 'running-pool', size: 12 }));
    field('host', 'Host', el('input', { type: 'search', id: 'running-host', size: 12 }));
    field('tag', 'Tag', el('input', { type: 'search', id: 'running-tag', size: 16, placeholder: 'App\\Models\\User:42' }));
    field('status', 'Status', el('select', { id: 'running-status' },
      el('option', { value: '', text: 'all' }), el('option', { value: 'past_timeout', text: 'past their timeout' })));
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      var f = {};
      RFILTER.forEach(k => { var v = inputs[k].value.trim(); if (v) f[k] = v; });
      var qs = new URLSearchParams(f).toString(), h = '#/running' + (qs ? '?' + qs : '');
      if (location.hash === h) refresh(true); else location.hash = h;
    });
    form.append(el('button', { type: 'submit', id: 'running-go', text: 'Show' }));
    return form;
  }
  function renderRunning(s, list) {
    var late = list.filter(j => { return j.past_timeout; }).length;
    s.count.textContent = num(list.length) + ' running job' + (list.length === 1 ? '' : 's') + (late ? ', ' + num(late) + ' past its timeout' : '');
    put(s.body, table('Host|Pool|#PID|Job|Queue|#Attempt|#Age|Timeout|Actions|Tags', list, j => {
      return el('tr', { 'data-uuid': j.uuid, class: j.past_timeout ? 'past-timeout' : null },
        td(j.host), td(j.pool), tdn(String(j.pid)), td(jobLink(j.uuid, j.name)), td(j.queue), tdn(j.attempt ? num(j.attempt) : '–'),
        tdn(dur(j.age_ms)), td(j.timeout_s ? (j.past_timeout ? pillEl('bad', 'past ' + j.timeout_s + ' s') : j.timeout_s + ' s') : '–'),
        td(j.own ? actBtn('stop-job', 'Stop', b => { act('Stop ' + j.uuid, 'api/jobs/' + enc(j.uuid) + '/stop', {}, b); }, 'danger')
          : el('span', { class: 'muted', text: 'on ' + j.host, title: "an action reaches this host's master only: use that host's dashboard" })),
        td(runningTags(j.tags), 'wrap'));
    }, { id: 'running-table', empty: 'No job is running.', keepShown: shownIn(s.body) }));
  }

  /* ---------- Pending ---------- */
  /* What waits in a queue (GET /api/jobs/pending), a page at a time; the
   * URL keeps the queue, the filters and the page (#/pending?queue=...&offset=N):
   * bookmarkable, back goes to the previous page. */
  var PFILTER = ['queue', 'class', 'q', 'tag', 'since', 'until', 'order', 'state'], PPAGE = 100;
  function pendingHash(f) {
    var o = {};
    PFILTER.concat(['offset']).forEach(k => { if (f[k]) o[k] = String(f[k]); });
    var qs = new URLSearchParams(o).toString();
    return '#/pending' + (qs ? '?' + qs : '');
  }
  function pendingFilterForm(s) {
    var form = el('form', { class: 'toolbar', id: 'pending-list-filter' }), inputs = {};
    function field(k, label, input) {
      input.name = k;
      input.value = s.filter[k] || (input.nodeName === 'SELECT' ? input.options[0].value : '');
      form.append(el('label', null, label, input));
      inputs[k] = input;
    }
    field('queue', 'Queue', el('input', { type: 'search', id: 'pending-list-queue', list: 'dl-pqueue', size: 12, required: true }));
    field('class', 'Class', el('input', { type: 'search', id: 'pending-list-class', size: 22, placeholder: 'App\\Jobs\\…' }));
    field('q', 'Text', el('input', { type: 'search', id: 'pending-list-text', size: 18, placeholder: 'text in the payload' }));
    field('tag', 'Tag', el('input', { type: 'search', id: 'pending-list-tag', size: 16, placeholder: 'App\\Models\\User:42' }));
    field('since', 'Pushed since', el('input', { type: 'search', id: 'pending-list-since', size: 10, placeholder: '1h, 2026-11-29' }));
    field('until', 'until', el('input', { type: 'search', id: 'pending-list-until', size: 10 }));
    field('order', 'Order', el('select', { id: 'pending-list-order' },
      el('option', { value: 'newest', text: 'newest first' }), el('option', { value: 'oldest', text: 'oldest first (run order)' })));
    field('state', 'State', el('select', { id: 'pending-list-state' },
      el('option', { value: 'all', text: 'ready and delayed' }), el('option', { value: 'ready', text: 'ready' }),
      el('option', { value: 'delayed', text: 'delayed' })));
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      var f = {};
      PFILTER.forEach(k => { var v = inputs[k].value.trim(); if (v && !(k === 'order' && v === 'newest') && !(k === 'state' && v === 'all')) f[k] = v; });
      var h = pendingHash(f);
      if (location.hash === h) refresh(true); else location.hash = h;
    });
    form.append(el('button', { type: 'submit', id: 'pending-list-go', text: 'Show' }));
    return form;
  }
  pages.pending = {
    title: 'Pending jobs',
    mount: (root, s) => {
      root.append(el('h1', { text: 'Pending jobs' }));
      s.filter = {};
      PFILTER.forEach(k => { var v = s.params.get(k); if (v) s.filter[k] = v; });
      s.offset = Math.max(0, parseInt(s.params.get('offset') || '0', 10) || 0);
      s.dlq = el('datalist', { id: 'dl-pqueue' });
      root.append(pendingFilterForm(s), s.dlq);
      s.queues = section(root, 'Queues', 'pending-queues');
      s.count = el('p', { class: 'muted', id: 'pending-list-count' });
      s.nav = el('div', { class: 'btns', id: 'pending-list-nav' });
      s.body = el('div', { id: 'pending-list' });
      root.append(s.count, s.body, s.nav);
      if (!s.filter.queue) s.count.textContent = 'Pick a queue to see what waits in it.';
    },
    feeds: s => {
      var feeds = [statusFeed(st => { renderPendingQueues(s, st); })];
      if (!s.filter.queue) return feeds;
      var filtered = !!(s.filter.class || s.filter.q || s.filter.tag || s.filter.since || s.filter.until);
      feeds.push({ url: pendingUrl(s, s.offset, PPAGE), every: filtered ? 15000 : 5000, then: d => { pendingOn(s, d, d.jobs || [], d.scanned || 0, 1); } });
      return feeds;
    }
  };
  function pendingUrl(s, offset, limit) {
    return 'api/jobs/pending?' + new URLSearchParams(Object.assign({}, s.filter, { limit: String(limit), offset: String(offset) })).toString();
  }
  /* A filter looks at a bounded number of jobs per request: go on from
   * next_offset until a page of matches, the end, or 20 requests. */
  function pendingOn(s, d, found, scanned, steps) {
    if (cur.state !== s) return;
    if (d.truncated && d.next_offset != null && found.length < PPAGE && steps < 20) {
      get(pendingUrl(s, d.next_offset, PPAGE - found.length)).then(r => {
        pendingOn(s, r.data, found.concat(r.data.jobs || []), scanned + (r.data.scanned || 0), steps + 1);
      }, e => { notice('Could not load the pending jobs: ' + (e.message || String(e))); });
      return;
    }
    renderPending(s, Object.assign({}, d, { jobs: found, scanned: scanned }));
  }
  /* Every queue of this master's pools with its counts, each a link to its list. */
  function renderPendingQueues(s, st) {
    var qs = queueRows(st).sort((a, b) => { return a.name < b.name ? -1 : a.name > b.name ? 1 : 0; });
    put(s.queues, table('Queue|#Ready|#Delayed|#Reserved', qs, q => {
      return el('tr', { 'data-queue': q.name, class: q.name === s.filter.queue ? 'active' : null },
        td(el('a', { href: pendingHash({ queue: q.name }), text: q.name })), tdn(num(q.ready || 0)), tdn(num(q.delayed || 0)), tdn(num(q.reserved || 0)));
    }, { id: 'pending-queues-table', empty: 'No queue.' }));
    if (s.dlq.children.length !== qs.length) { clear(s.dlq); qs.forEach(q => { s.dlq.append(el('option', { value: q.name })); }); }
  }
  /* A job's tags, each a link to this queue's jobs with that tag. */
  function pendingTags(s, tags) {
    var span = el('span', { class: 'tags' });
    tags.forEach((t, i) => {
      if (i) span.append(' ');
      span.append(el('a', { href: pendingHash({ queue: s.filter.queue, tag: t, order: s.filter.order, state: s.filter.state }), class: 'tag', text: t }));
    });
    return span;
  }
  function renderPending(s, d) {
    var c = d.counts || {}, jobs = d.jobs || [], filtered = !!(s.filter.class || s.filter.q || s.filter.tag);
    s.count.textContent = d.queue + ': ' + num(c.ready || 0) + ' ready, ' + num(c.delayed || 0) + ' delayed, ' + num(c.reserved || 0) + ' reserved · ' +
      (jobs.length ? (filtered ? num(jobs.length) + ' matching' : 'positions ' + num(jobs[0].position + 1) + '–' + num(jobs[jobs.length - 1].position + 1)) : 'none here') +
      ', ' + (d.order === 'oldest' ? 'oldest first (the order they run in)' : 'newest first') +
      (d.truncated ? ' · ' + num(d.scanned) + ' jobs looked at, more are left' : '');
    put(s.body, table('#|State|Job|#Attempts|Pushed at|Available at|#Size|Tags|UUID', jobs, j => {
      return el('tr', { 'data-uuid': j.uuid || ('#' + j.position) },
        tdn(num(j.position + 1)), td(j.state), td(j.malformed ? el('span', { class: 'muted', text: '(not a job payload)' }) : jobLink(j.uuid, j.class)),
        tdn(j.attempts == null ? '–' : num(j.attempts)), td(j.pushed_at ? when(j.pushed_at * 1000) : '–'),
        td(j.available_at ? when(j.available_at * 1000) : '–'), tdn(j.size < 1024 ? num(j.size) + ' B' : kb(j.size / 1024)), td(pendingTags(s, j.tags || [])), td(j.uuid || '–', 'mono'));
    }, { id: 'pending-list-table', limit: PPAGE, empty: filtered ? 'Nothing matches here.' : 'No job waits here.' }));
    clear(s.nav);
    if (s.offset > 0) s.nav.append(el('a', { href: pendingHash(s.filter), id: 'pending-list-first', text: '« first page' }));
    if (d.next_offset != null) s.nav.append(el('a', { href: pendingHash(Object.assign({}, s.filter, { offset: d.next_offset })),
      id: 'pending-list-next', text: d.truncated && !jobs.length ? 'look further →' : 'next page →' }));
  }

  /* ---------- Failed ---------- */
  /* The search runs on the server (GET /api/failed?class=...&q=...); the
   * URL keeps the filters (#/failed?...): bookmarkable, back works. */
  var FFILTER = ['q', 'class', 'queue', 'pool', 'host', 'since', 'until'], FMATCH = 100;
  function localInput(sec) {
    var d = new Date(sec * 1000), p = n => String(n).padStart(2, '0');
    return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
  }
  function failedFilter(params) {
    var f = {};
    FFILTER.forEach(k => { var v = params.get(k); if (v) f[k] = v; });
    return f;
  }
  pages.failed = {
    title: 'Failed jobs',
    mount: (root, s) => {
      root.append(el('h1', { text: 'Failed jobs' }));
      s.filter = failedFilter(s.params);
      var form = el('form', { class: 'toolbar', id: 'failed-filter' }), inputs = {};
      function field(k, label, input) {
        var v = s.filter[k] || '';
        input.name = k;
        input.value = (k === 'since' || k === 'until') ? (/^\d+$/.test(v) ? localInput(+v) : '') : v;
        form.append(el('label', null, label, input));
        inputs[k] = input;
      }
      s.search = el('input', { type: 'search', id: 'failed-search', placeholder: 'text in the payload or exception', size: 26 });
      field('q', 'Search', s.search);
      field('class', 'Class', el('input', { type: 'search', id: 'failed-class', list: 'dl-fname', size: 22, placeholder: 'App\\Jobs\\…' }));
      field('queue', 'Queue', el('input', { type: 'search', id: 'failed-queue', list: 'dl-fqueue', size: 10 }));
      field('pool', 'Pool', el('input', { type: 'search', id: 'failed-pool', size: 8 }));
      field('host', 'Host', el('input', { type: 'search', id: 'failed-host', size: 10 }));
      field('since', 'Since', el('input', { type: 'datetime-local', step: 1, id: 'failed-since' }));
      field('until', 'Until', el('input', { type: 'datetime-local', step: 1, id: 'failed-until' }));
      function go(f) {
        var h = failedHash(f, s.app, 0);
        if (location.hash === h) refresh(true); else location.hash = h;
      }
      form.addEventListener('submit', ev => {
        ev.preventDefault();
        var f = {};
        FFILTER.forEach(k => {
          var v = inputs[k].value.trim();
          if (v && (k === 'since' || k === 'until')) { var t = new Date(v).getTime(); v = t === t ? String(Math.floor(t / 1000)) : ''; }
          if (v) f[k] = v;
        });
        go(f);
      });
      form.append(el('button', { type: 'submit', id: 'failed-go', text: 'Search' }),
        el('button', { type: 'button', text: 'Clear', on: { click: () => { go({}); } } }));
      s.dl = { name: el('datalist', { id: 'dl-fname' }), queue: el('datalist', { id: 'dl-fqueue' }) };
      root.append(form);
      add(root, [s.dl.name, s.dl.queue]);
      var bar = el('div', { class: 'toolbar' });
      if (Object.keys(s.filter).length) {
        bar.append(el('span', { class: 'muted', text: 'What this filter matches: ' }),
          actBtn('retry-filter', 'Retry matching', b => { bulkFilter(s, 'retry', b); }),
          actBtn('forget-filter', 'Forget matching', b => { bulkFilter(s, 'forget', b); }, 'danger'));
        s.confirm = el('div', { id: 'failed-confirm', class: 'btns' });
        bar.append(s.confirm);
      } else {
        s.byName = el('select', { id: 'bulk-name' });
        s.byQueue = el('select', { id: 'bulk-queue' });
        bar.append(el('label', null, 'Retry all of class', s.byName, actBtn('retry-name', 'Retry class', b => {
          if (s.byName.value) act('Retry all ' + s.byName.value, 'api/failed/retry', { name: s.byName.value }, b);
        })));
        bar.append(el('label', null, 'Retry all in queue', s.byQueue, actBtn('retry-queue', 'Retry queue', b => {
          if (s.byQueue.value) act('Retry all in queue ' + s.byQueue.value, 'api/failed/retry', { queue: s.byQueue.value }, b);
        })));
      }
      root.append(bar);
      s.count = el('p', { class: 'muted', id: 'failed-count' });
      root.append(s.count);
      s.body = el('div', { id: 'failed' });
      root.append(s.body);
      appFailedBlock(root, s);
    },
    feeds: s => {
      var pools = { url: 'api/status', every: 15000, then: d => { appFailedPools(s, d); } };
      if (!Object.keys(s.filter).length)
        return [{ url: 'api/failed?limit=1000', then: d => { s.list = d.failed || []; renderFailed(s); fillBulk(s); } }, pools];
      var url = 'api/failed?' + new URLSearchParams(Object.assign({}, s.filter, { limit: String(FMATCH) })).toString();
      return [{ url: url, every: 15000, then: d => { searchOn(s, url, d, d.failed || [], d.scanned || 0, 1); } }, pools];
    }
  };
  /* Go on with the cursor (each request looks at a bounded part of the
   * store) until FMATCH matches, the end, or 60 steps. */
  function searchOn(s, url, d, found, scanned, steps) {
    if (cur.state !== s) return;
    if (d.cursor && found.length < FMATCH && steps < 60) {
      get(url + '&cursor=' + enc(d.cursor)).then(r => {
        searchOn(s, url, r.data, found.concat(r.data.failed || []), scanned + (r.data.scanned || 0), steps + 1);
      }, e => { notice('Search failed: ' + (e.message || String(e))); });
      return;
    }
    s.list = found.slice(0, FMATCH);
    s.more = !!d.cursor;
    s.scanned = scanned;
    renderFailed(s);
    s.list.forEach(f => {
      [['name', 'name'], ['queue', 'queue']].forEach(kv => {
        var dl = s.dl[kv[0]], v = f[kv[1]];
        if (v && !dl.querySelector('option[value="' + CSS.escape(v) + '"]') && dl.children.length < 500) dl.append(el('option', { value: v }));
      });
    });
  }
  /* Retry or forget what the filter matches: the count first (a dry run), then confirm. */
  function bulkFilter(s, verb, btn) {
    var path = 'api/failed/' + verb;
    btn.disabled = true;
    clear(s.confirm);
    postAll(path, Object.assign({ dry_run: true }, s.filter)).then(j => {
      var n = j.matched || 0;
      s.confirm.append(el('span', { id: 'failed-confirm-count', 'data-count': String(n),
        text: n ? num(n) + ' failed job' + (n === 1 ? '' : 's') + ' match. ' + (verb === 'retry' ? 'Retry' : 'Forget') + ' them? ' : 'No failed job matches.' }));
      if (n) s.confirm.append(actBtn('confirm-' + verb, 'Confirm ' + verb, b => {
        clear(s.confirm);
        act((verb === 'retry' ? 'Retry ' : 'Forget ') + 'the failed jobs matching the filter', path, s.filter, b);
      }, verb === 'forget' ? 'danger' : null), el('button', { type: 'button', text: 'Cancel', on: { click: () => { clear(s.confirm); } } }));
    }, e => {
      if (e.status === 401) askToken('Bulk actions need the API token.', false);
      notice('Counting the matches failed' + (e.status ? ' (' + e.status + ')' : '') + ': ' + (e.message || String(e)));
    }).then(() => { btn.disabled = false; });
  }
  function fillBulk(s) {
    function fill(sel, key) {
      var counts = new Map();
      s.list.forEach(f => { counts.set(f[key], (counts.get(f[key]) || 0) + 1); });
      var keep = sel.value;
      clear(sel).append(el('option', { value: '', text: '—' }));
      Array.from(counts.keys()).sort().forEach(k => { sel.append(el('option', { value: k, text: k + ' (' + counts.get(k) + ')' })); });
      sel.value = counts.has(keep) ? keep : '';
    }
    fill(s.byName, 'name'); fill(s.byQueue, 'queue');
  }
  /* The app's failer of an app_driver pool (GET /api/failed?app=POOL): the
   * master answers from a snapshot ("loading" until the pool's app agent
   * answered that page), so the block asks every 2 s while it is shown.
   * The pool (app) and the page's offset (aoff) live in the URL beside the
   * filters; q, class, queue, since and until apply to it too. Text only. */
  var APAGE = 50, AFILTER = { q: 'q', class: 'class', queue: 'queue', since: 'since', until: 'until' };
  function failedHash(f, app, aoff) {
    var p = Object.assign({}, f);
    if (app) { p.app = app; if (aoff > 0) p.aoff = String(aoff); }
    var qs = new URLSearchParams(p).toString();
    return '#/failed' + (qs ? '?' + qs : '');
  }
  function appFailedBlock(root, s) {
    var box = section(root, "The app's failer (app_driver pools)", 'failed-app');
    s.app = s.params.get('app') || '';
    s.appOff = Math.min(10000, Math.max(0, parseInt(s.params.get('aoff') || '0', 10) || 0));
    s.appPick = el('select', { id: 'failed-app-pool', on: { change: () => { location.hash = failedHash(s.filter, s.appPick.value, 0); } } },
      el('option', { value: '', text: "— none (qpool's store only) —" }));
    if (s.app) { s.appPick.append(el('option', { value: s.app, text: s.app })); s.appPick.value = s.app; }
    var form = el('form', { class: 'toolbar', id: 'failed-app-form', on: { submit: ev => {
      ev.preventDefault();
      var h = failedHash(s.filter, s.appPick.value, 0);
      if (location.hash === h) { s.appGen = (s.appGen || 0) + 1; appFailedPoll(s, s.appGen); } else location.hash = h;
    } } }, el('label', { text: 'Source: pool ' }), s.appPick, el('button', { type: 'submit', id: 'failed-app-go', text: 'Show' }));
    var ignored = ['pool', 'host'].filter(k => s.filter[k]);
    s.appStatus = el('p', { class: 'muted', id: 'failed-app-status', text: s.app ? 'Pool ' + s.app + ': asking its app agent…'
      : "qpool's store is shown above; pick a pool that preloads its app (app_driver) to see its app's failer." });
    s.appNav = el('p', { class: 'pager', id: 'failed-app-nav' });
    s.appBody = el('div', { id: 'failed-app-list' });
    box.append(form, ignored.length ? el('p', { class: 'muted', text: 'The ' + ignored.join(' and ') + " filter applies to qpool's store only." }) : '',
      s.appStatus, s.appNav, s.appBody);
    s.appGen = 1;
    if (s.app) appFailedPoll(s, s.appGen);
  }
  /* The pools with an app failer (status: app_failer), as the choice's options. */
  function appFailedPools(s, st) {
    var names = (st.pools || []).filter(p => p.app_failer).map(p => p.name);
    if (s.app && names.indexOf(s.app) < 0) names.push(s.app);
    var have = Array.from(s.appPick.options).slice(1).map(o => o.value);
    if (have.join('\n') === names.join('\n')) return;
    while (s.appPick.options.length > 1) s.appPick.remove(1);
    names.forEach(n => { s.appPick.append(el('option', { value: n, text: n })); });
    s.appPick.value = s.app;
  }
  function appFailedUrl(s) {
    var p = { app: s.app, limit: String(APAGE) };
    if (s.appOff) p.offset = String(s.appOff);
    Object.keys(AFILTER).forEach(k => { if (s.filter[k]) p[AFILTER[k]] = s.filter[k]; });
    return 'api/failed?' + new URLSearchParams(p).toString();
  }
  function appFailedPoll(s, gen) {
    s.appTimer = null;
    if (cur.state !== s || !s.app || gen !== s.appGen) return;
    var again = ms => { if (cur.state === s && gen === s.appGen) s.appTimer = setTimeout(() => appFailedPoll(s, gen), ms); };
    if (document.hidden) { again(2000); return; } /* as refresh(): no asking from a hidden tab */
    get(appFailedUrl(s)).then(r => { var d = r.data || {}; if (gen === s.appGen) renderAppFailed(s, d); again(d.state === 'loading' ? 700 : 2000); },
      e => { if (gen === s.appGen) { s.appStatus.textContent = 'Pool ' + s.app + ': ' + (e.message || String(e)); clear(s.appBody); clear(s.appNav); } again(2000); });
  }
  function appActionText(a) {
    if (!a) return '';
    if (a.ok === false) return ' Last action failed: ' + (a.error || '?') + '.';
    var n = x => (x || []).length;
    return ' Last action: ' + (a.retried ? n(a.retried) + ' retried' : n(a.forgotten) + ' forgotten') +
      (n(a.missing) ? ', ' + n(a.missing) + ' not found' : '') + (n(a.not_done) ? ', ' + n(a.not_done) + ' not done' : '') + '.';
  }
  /* "« newer" and "older »" through the app's failer (the agent's offset). */
  function appFailedNav(s, d, list) {
    clear(s.appNav);
    if (d.state !== 'ok') return;
    var off = d.offset || 0, total = d.total || 0, next = off + list.length;
    s.appNav.dataset.offset = String(off);
    if (off > 0) s.appNav.append(el('a', { href: failedHash(s.filter, s.app, Math.max(0, off - APAGE)), id: 'failed-app-newer', text: '« newer' }), ' ');
    s.appNav.append(el('span', { id: 'failed-app-page', text: 'page ' + num(Math.floor(off / APAGE) + 1) + ' of ' + num(Math.max(1, Math.ceil(total / APAGE))) }));
    /* a partial count (the agent's scan ran out of time) is a lower bound: a full page may have more behind it */
    var more = next < total || (d.partial && list.length >= APAGE);
    if (list.length && more && next <= 10000) s.appNav.append(' ', el('a', { href: failedHash(s.filter, s.app, next), id: 'failed-app-older', text: 'older »' }));
  }
  function renderAppFailed(s, d) {
    var pool = d.pool || s.app, list = d.failed || [], off = d.offset || 0;
    var matching = Object.keys(AFILTER).some(k => s.filter[k]) ? ' matching' : '';
    s.appStatus.textContent = d.state === 'loading' ? 'Pool ' + pool + ': asking its app agent…'
      : d.state === 'error' ? 'Pool ' + pool + ': ' + (d.error || 'error')
      : 'Pool ' + pool + ': ' + (list.length ? num(off + 1) + '–' + num(off + list.length) : 'none') + ' of ' + (d.partial ? 'at least ' : '') +
        num(d.total || 0) + matching + " failed jobs in the app's failer, newest first" +
        (d.acting ? '; a retry or forget is under way.' : '.') + appActionText(d.last_action);
    appFailedNav(s, d, list);
    var post = (verb, f, b) => { act((verb === 'retry' ? 'Retry ' : 'Forget ') + f.id, 'api/failed/app/' + verb, { pool: pool, ids: [f.id] }, b); };
    put(s.appBody, table('Failed at|Job|Queue|Connection|Exception|ID|Actions', d.state === 'ok' ? list : [], f => {
      return el('tr', { 'data-id': f.id, class: 'failed' },
        td(when(f.failed_at * 1000)), td(f.class || '–'), td(f.queue || '–'), td(f.connection || '–'),
        td(f.exception || '', 'wrap'), td(f.id, 'mono'),
        td(el('div', { class: 'btns' },
          actBtn('retry', 'Retry', b => { post('retry', f, b); }),
          actBtn('forget', 'Forget', b => { post('forget', f, b); }, 'danger'))));
    }, { id: 'failed-app-table', empty: d.state === 'ok' ? "No failed jobs in the app's failer." : '' }));
  }
  function renderFailed(s) {
    var list = s.list, q = Object.keys(s.filter).length > 0;
    s.count.textContent = q ? num(list.length) + ' matching failed job' + (list.length === 1 ? '' : 's') + ', newest first' +
      (s.more ? ' (the first ' + num(list.length) + '; more of the store is left: narrow the filter)' : '') + ' · ' + num(s.scanned) + ' records looked at'
      : num(list.length) + ' failed job' + (list.length === 1 ? '' : 's');
    s.tableEl = table('Failed at|Job|Queue|Pool|Host|Exception|UUID|Actions', list, f => {
      return el('tr', { 'data-uuid': f.uuid, class: 'failed' },
        td(when(f.failed_at * 1000)), td(jobLink(f.uuid, f.name)), td(f.queue), td(f.pool || '–'), td(f.host || '–'), td((f.exception || '').split('\n')[0], 'wrap', f.exception || null), td(f.uuid, 'mono'),
        td(el('div', { class: 'btns' },
          actBtn('retry', 'Retry', b => { act('Retry ' + f.uuid, 'api/failed/' + enc(f.uuid) + '/retry', {}, b); }),
          actBtn('forget', 'Forget', b => { act('Forget ' + f.uuid, 'api/failed/' + enc(f.uuid) + '/forget', {}, b); }, 'danger'))));
    }, { id: 'failed-table', empty: q ? 'Nothing matches.' : 'No failed jobs.', keepShown: shownIn(s.body) });
    put(s.body, s.tableEl);
  }

  /* ---------- Metrics ---------- */
  pages.metrics = {
    title: 'Metrics',
    mount: (root, s) => {
      root.append(el('h1', null, 'Metrics ', seg(RANGE, chartRange, v => { chartRange = v; refresh(true); })));
      root.append(el('p', { class: 'muted', text: 'From the per-minute job history in Redis (every host). Percentiles across series are count-weighted approximations. Click a row for its charts.' }));
      s.charts = el('div', { class: 'charts', id: 'metrics-charts' });
      root.append(s.charts);
      s.cls = section(root, 'By job class', 'metrics-classes');
      s.q = section(root, 'By queue', 'metrics-queues');
      s.sel = null;
    },
    feeds: s => { return [{ url: 'api/metrics?minutes=' + chartRange, every: SLOW, then: m => { s.m = m; renderMetrics(s); } }]; }
  };
  function renderMetrics(s) {
    var m = s.m, byC = aggregate(m, x => x.job), byQ = aggregate(m, x => x.queue), n = byC.xs.length;
    function tbl(box, a, kind) {
      var gs = Array.from(a.groups.values()).sort((x, y) => y.sum.count - x.sum.count);
      clear(box).append(table('' + (kind === 'class' ? 'Job class' : 'Queue') + '|#Attempts|#Done|#Failed|#Released|#Failure rate|Throughput|#Runtime ≈p50|#Runtime ≈p95|Runtime|#Wait ≈p95|Failures',
        gs, g => {
          var x = g.sum;
          var tr = el('tr', { 'data-metric': kind, 'data-key': g.key, class: s.sel && s.sel.kind === kind && s.sel.key === g.key ? 'sel' : null },
            td(el('a', { href: '#/metrics', text: g.key || '(none)', on: { click: ev => { ev.preventDefault(); s.sel = { kind: kind, key: g.key, g: g }; drawSel(s, n, a.xs); } } }), 'x'),
            tdn(num(x.count)), tdn(num(x.done)), tdn(num(x.fail)), tdn(num(x.rel)), tdn(pct(x.count ? x.fail / x.count : null)),
            td(spark(perMinute(g, n, zero(y => y.count)), 'l0')),
            tdn(dur(avgOr(x.r50, x.rc))), tdn(dur(avgOr(x.r95, x.rc))), td(spark(perMinute(g, n, y => avgOr(y.r95, y.rc)), 'l2')),
            tdn(dur(avgOr(x.w95, x.wc))), td(spark(perMinute(g, n, zero(y => y.fail)), 'l1')));
          return tr;
        }, { empty: 'No jobs in this period.' }));
    }
    tbl(s.cls, byC, 'class');
    tbl(s.q, byQ, 'queue');
    if (s.sel) { var g = (s.sel.kind === 'class' ? byC : byQ).groups.get(s.sel.key); s.sel.g = g; }
    drawSel(s, n, byC.xs);
  }
  /* The standard charts of a metrics group g: t throughput, r runtime, w wait, f failure rate. */
  function charts(g, xs, label, kinds) {
    var n = xs.length, sfx = label ? ': ' + label : '';
    function pm(f) { return perMinute(g, n, f); }
    /* exact percentiles of every series merged, per minute (the server's "all") */
    function ex(h, q) { var out = new Array(n); for (var i = 0; i < n; i++) { var a = g.all[i]; out[i] = a && a[h] && a[h][q] != null ? a[h][q] : null; } return out; }
    var C = {
      t: () => { return lineChart('Throughput (attempts / min)' + sfx, xs, [{ name: 'done', values: pm(zero(x => x.done)) }, { name: 'failed', values: pm(zero(x => x.fail)) }, { name: 'released', values: pm(zero(x => x.rel)) }], axNum); },
      r: () => { return g && g.all ? lineChart('Runtime p50 / p95' + sfx, xs, [{ name: 'p50', values: ex('runtime_ms', 'p50') }, { name: 'p95', values: ex('runtime_ms', 'p95') }], axMs)
        : lineChart('Runtime ≈p50 / p95' + sfx, xs, [{ name: 'p50', values: pm(x => avgOr(x.r50, x.rc)) }, { name: 'p95', values: pm(x => avgOr(x.r95, x.rc)) }], axMs); },
      w: () => { return g && g.all ? lineChart('Wait (measured) p50 / p95' + sfx, xs, [{ name: 'p50', values: ex('wait_ms', 'p50') }, { name: 'p95', values: ex('wait_ms', 'p95') }], axMs)
        : lineChart('Wait (measured) ≈p50 / p95' + sfx, xs, [{ name: 'p50', values: pm(x => avgOr(x.w50, x.wc)) }, { name: 'p95', values: pm(x => avgOr(x.w95, x.wc)) }], axMs); },
      f: () => { return lineChart('Failure rate' + sfx, xs, [{ name: 'failed / attempts', values: pm(x => x.count ? x.fail / x.count * 100 : null) }], v => num(v, v < 10 ? 2 : 1) + '%'); }
    };
    return kinds.map(k => C[k]());
  }
  function drawSel(s, n, xs) {
    clear(s.charts);
    var g = s.sel && s.sel.g, label = s.sel ? s.sel.key : 'all jobs';
    if (!s.sel) g = aggregate(s.m, null).groups.get('');
    if (s.sel) s.charts.append(el('div', { class: 'muted' }, 'Showing ' + s.sel.kind + ' ', el('strong', { text: label }), ' · ',
      el('a', { href: '#/metrics', text: 'show all', on: { click: ev => { ev.preventDefault(); s.sel = null; drawSel(s, n, xs); } } })));
    add(s.charts, charts(g, xs, label, ['t', 'r', 'f']));
  }

  /* ---------- Batches (Laravel's Bus::batch, read by the pools' app agents) ---------- */
  /* #/batches lists the newest; #/batches/<id> is one batch with its failed jobs and "Retry failed jobs". */
  function batchState(b) { return b.cancelled_at ? 'cancelled' : b.finished_at ? 'finished' : b.failed > 0 ? 'failures' : 'running'; }
  function batchBar(b) {
    return el('span', { class: 'batch-progress' }, el('progress', { max: 100, value: b.progress || 0, 'aria-label': 'processed' }), ' ' + num(b.progress || 0) + ' %');
  }
  function batchWhen(sec) { return sec ? when(sec * 1000) : '–'; }
  /* The list's filters (GET /api/batches?q=&status=&since=&until=) live in the URL: #/batches?status=failed. */
  var BFILTER = ['q', 'status', 'since', 'until'];
  function batchesHash(f) {
    var o = {};
    BFILTER.forEach(k => { if (f[k]) o[k] = String(f[k]); });
    var qs = new URLSearchParams(o).toString();
    return '#/batches' + (qs ? '?' + qs : '');
  }
  function batchesFilterForm(s) {
    var form = el('form', { class: 'toolbar', id: 'batches-filter' }), inputs = {};
    function field(k, label, input) {
      input.name = k; input.value = s.filter[k] || '';
      form.append(el('label', null, label, input));
      inputs[k] = input;
    }
    field('q', 'Name', el('input', { type: 'search', id: 'batches-q', size: 18, placeholder: 'text in the name or id' }));
    field('status', 'Status', el('select', { id: 'batches-status' }, el('option', { value: '', text: 'any' }),
      el('option', { value: 'pending', text: 'pending' }), el('option', { value: 'finished', text: 'finished' }),
      el('option', { value: 'failed', text: 'with failures' }), el('option', { value: 'cancelled', text: 'cancelled' })));
    field('since', 'Since', el('input', { type: 'search', id: 'batches-since', size: 10, placeholder: '1h, 2026-11-29' }));
    field('until', 'Until', el('input', { type: 'search', id: 'batches-until', size: 10 }));
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      var f = {};
      BFILTER.forEach(k => { var v = inputs[k].value.trim(); if (v) f[k] = v; });
      var h = batchesHash(f);
      if (location.hash === h) refresh(true); else location.hash = h;
    });
    form.append(el('button', { type: 'submit', id: 'batches-go', text: 'Show' }));
    return form;
  }
  function batchesUrl(s) {
    var qs = new URLSearchParams(s.filter || {}).toString();
    return 'api/batches' + (qs ? '?' + qs : '');
  }
  pages.batches = {
    title: 'Batches',
    mount: (root, s, id) => {
      if (id) root.append(el('p', null, el('a', { href: '#/batches', text: '← batches' })));
      root.append(el('h1', null, id ? el('span', { id: 'batch-title', text: 'Batch ' + id }) : 'Job batches'));
      s.filter = {};
      if (!id) { BFILTER.forEach(k => { var v = s.params.get(k); if (v) s.filter[k] = v; }); root.append(batchesFilterForm(s)); }
      s.pools = el('div', { id: 'batch-pools' });
      s.body = el('div', { id: id ? 'batch' : 'batches' }, el('p', { class: 'muted', text: 'loading…' }));
      root.append(s.pools, s.body);
    },
    feeds: (s, id) => {
      return [{ url: id ? 'api/batches/' + enc(id) : batchesUrl(s), then: d => { if (id) renderBatch(s, id, d); else renderBatches(s, d); },
        fail: e => { if (e.status === 404) { clear(s.pools); clear(s.body).append(el('p', { class: 'empty', text: 'No batch ' + id + ' among the newest 50.' })); } } }];
    }
  };
  /* What the pools say: starting agents, errors, no pool that reads batches, the last retry. */
  function renderBatchPools(s, d, only) {
    var box = clear(s.pools);
    if (d.note) box.append(el('p', { class: 'muted', id: 'batches-note', text: d.note }));
    (d.pools || []).forEach(p => {
      if (only && p.pool !== only) return;
      if (p.state !== 'ok') box.append(el('p', { class: 'muted', 'data-pool': p.pool }, 'pool ' + p.pool + ': ', pillEl(p.state), p.error ? ' ' + p.error : ''));
      var r = p.last_retry;
      if (r && (!only || !s.id || r.batch === s.id)) box.append(el('p', { class: 'muted batch-retry', 'data-pool': p.pool },
        'Last retry (pool ' + p.pool + ', ' + batchWhen(r.at) + '): ' + (r.ok ? num(r.retried) + ' job(s) pushed back' +
          (r.not_found ? ', ' + num(r.not_found) + ' not found' : '') + (r.batch ? ' for batch ' + r.batch : '') : 'failed: ' + r.error)));
    });
  }
  function renderBatches(s, d) {
    renderBatchPools(s, d, null);
    put(s.body, table('Name|Progress|#Total|#Pending|#Processed|#Failed|State|Created|Finished|Pool', d.batches || [], b => {
      return el('tr', { 'data-batch': b.id, class: 'batch' },
        td(el('a', { href: '#/batches/' + enc(b.id), text: b.name || b.id, title: b.id })), td(batchBar(b)),
        tdn(num(b.total)), tdn(num(b.pending)), tdn(num(b.processed)), tdn(num(b.failed)),
        td(pillEl(batchState(b))), td(batchWhen(b.created_at)), td(batchWhen(b.finished_at || b.cancelled_at)), td(b.pool));
    }, { id: 'batches-table', empty: Object.keys(s.filter || {}).length ? 'No batch matches the filter.' : 'No job batches.' }));
  }
  function renderBatch(s, id, d) {
    var b = d.batch || {}, key = JSON.stringify([b, (d.pools || []).map(p => [p.pool, p.state, p.error, p.last_retry]), d.jobs, d.jobs_error]);
    s.id = id;
    if (s.shown === key) return; /* the same batch: no redraw (read_at alone moves) */
    s.shown = key;
    document.getElementById('batch-title').textContent = b.name ? 'Batch ' + b.name : 'Batch ' + id;
    renderBatchPools(s, d, b.pool);
    var body = clear(s.body), kv = el('dl', { class: 'kv', id: 'batch-summary' });
    function row(k, v, key) { kv.append(el('dt', { text: k }), el('dd', { 'data-k': key }, v)); }
    row('ID', b.id, 'id');
    row('Name', b.name || '–', 'name');
    row('Progress', batchBar(b), 'progress');
    row('State', pillEl(batchState(b)), 'state');
    row('Total', num(b.total), 'total');
    row('Pending', num(b.pending), 'pending');
    row('Processed', num(b.processed), 'processed');
    row('Failed', num(b.failed), 'failed');
    row('Created', batchWhen(b.created_at), 'created');
    row('Finished', batchWhen(b.finished_at), 'finished');
    row('Cancelled', batchWhen(b.cancelled_at), 'cancelled');
    row('Pool', b.pool, 'pool');
    body.append(kv);
    var ids = b.failed_ids || [];
    var btn = actBtn('retry-batch', 'Retry failed jobs', x => { act('Retry the failed jobs of batch ' + (b.name || id), 'api/batches/' + enc(id) + '/retry', {}, x); });
    if (!ids.length) btn.disabled = true;
    body.append(el('div', { class: 'toolbar' }, btn));
    body.append(el('h2', { text: 'Failed jobs' }));
    body.append(table('Job', ids, u => { return el('tr', { 'data-uuid': u }, td(jobLink(u))); }, { id: 'batch-failed', empty: 'No failed jobs.' }));
    batchDoneJobs(body, d);
    body.append(batchJobsLink(b));
  }
  /* The batch's jobs as qpool's job history saw them (GET /api/batches/<id>'s "jobs": the newest 1,000). */
  function batchDoneJobs(body, d) {
    body.append(el('h2', { text: 'Jobs run' }));
    if (!Array.isArray(d.jobs)) { body.append(el('p', { class: 'muted', id: 'batch-done-error', text: 'Its jobs cannot be read: ' + (d.jobs_error || 'no answer') })); return; }
    body.append(el('p', { class: 'muted', id: 'batch-done-note', text: num(d.jobs.length) + ' of the ' + num(d.jobs_kept || 0) +
      ' attempts the job history kept for this batch (the newest 1,000, as long as the history is kept).' }));
    body.append(table('Job|Class|Outcome|#Runtime|Finished', d.jobs, j => {
      return el('tr', { 'data-uuid': j.uuid, class: 'batch-job' }, td(jobLink(j.uuid)), td(j.name), td(pillEl(j.outcome)),
        tdn(dur(j.runtime_ms)), td(when(j.finished_at)));
    }, { id: 'batch-done', empty: 'No job of this batch in the history yet.' }));
  }
  /* Every job of the batch that the history keeps a payload of (its serialized command holds the batch id). */
  function batchJobsLink(b) {
    return el('p', { class: 'muted', id: 'batch-jobs' },
      el('a', { href: jobsHash({ q: b.id }), 'data-action': 'batch-jobs', text: 'All of this batch\'s jobs in the history' }),
      ' (those whose payload it keeps: released attempts, and done ones with job_history_payloads = true; the failed ones are above).');
  }

  /* ---------- Hosts ---------- */
  pages.hosts = {
    title: 'Hosts',
    mount: (root, s) => {
      root.append(el('h1', { text: 'Hosts (the fleet)' }));
      s.sum = el('p', { class: 'muted', id: 'hosts-summary' });
      root.append(s.sum);
      s.body = el('div', { id: 'hosts' });
      root.append(s.body);
    },
    feeds: s => { return [{ url: 'api/fleet', then: f => { renderHosts(s, f); } }]; }
  };
  function renderHosts(s, f) {
    var t = f.totals || {};
    s.sum.textContent = num(t.masters) + ' master(s), ' + num(t.paused_masters) + ' paused, ' + num(t.workers) + ' workers, ' + num(t.busy) + ' busy' + (f.now_ms ? ' · as of ' + when(f.now_ms) : '');
    put(s.body, table('Host|#PID|Version|State|#Up|Started|Config|#Workers|#Busy|#Idle|#Max|Pools',
      f.masters || [], m => {
        var w = m.workers || {};
        return el('tr', { 'data-host-id': m.id, class: 'host' }, td(m.host, null, m.id), tdn(String(m.pid)), td(m.version), td(pillEl(hostState(m), m.state)),
          tdn(dur((m.uptime_s || 0) * 1000)), td(when(m.started_at * 1000)), td(m.config, 'x', m.config),
          tdn(num(w.total)), tdn(num(w.busy)), tdn(num(w.idle)), tdn(num(m.max_workers)),
          td((m.pools || []).map(p => p.name + ' ' + p.workers + '/' + p.target + (p.paused ? ' (paused)' : '') +
            (p.fleet_budget ? ' (' + budgetText(p.fleet_budget) + ')' : '')).join(', '), 'wrap'));
      }, { id: 'hosts-table', empty: 'No live masters.' }));
  }

  /* ---------- Limits (the top-level limits, issue 33) ---------- */
  pages.limits = {
    title: 'Limits',
    mount: (root, s) => {
      root.append(el('h1', { text: 'Fleet-wide limits' }));
      root.append(el('p', { class: 'muted', text: 'Each limit of the config, read from Redis each balance pass: jobs held back wait in their queues with their attempts unchanged.' }));
      s.body = el('div', { id: 'limits' });
      root.append(s.body);
    },
    feeds: s => { return [{ url: 'api/limits', then: d => { renderLimits(s, d); } }]; }
  };
  function limitName(l) {
    var t = (l.class || 'any class') + (l.queue ? ' on ' + l.queue : '');
    return l.tag_prefix ? t + ' per ' + l.tag_prefix + '…' : t;
  }
  function limitRate(l) {
    if (!l.rate) return '–';
    if (l.tag_prefix) return l.rate + ' per key';
    return l.rate + (l.tokens == null ? '' : ' (' + num(l.tokens, 1) + ' tokens)');
  }
  function renderLimits(s, d) {
    put(s.body, table('Limit|#In use|Rate|#Waiting|#Waited|Alert', d.limits || [], (l, i) => {
      var use = l.concurrency ? num(l.in_use) + ' / ' + num(l.concurrency) + (l.tag_prefix ? ' per key' : '') : '–';
      var alert = l.alerting ? pillEl('degraded', 'alerting') : l.alert_after ? 'after ' + dur(l.alert_after * 1000) : '–';
      return el('tr', { 'data-key': 'limit-' + i, class: 'limit' + (l.waiting ? ' held' : '') },
        td(limitName(l), 'wrap'), tdn(use), td(limitRate(l)), tdn(num(l.waiting)),
        tdn(l.waited_s ? dur(l.waited_s * 1000) : l.waited_s == null ? '–' : '0'), td(alert));
    }, { id: 'limits-table', empty: 'No limits in the config (the top-level limits list).' }));
  }

  /* ---------- the theme: the system's (prefers-color-scheme) unless the toggle chose one ---------- */
  var THEME_KEY = 'qpool.theme';
  function themeStored() { try { return localStorage.getItem(THEME_KEY); } catch (e) { return null; } }
  function themeStore(v) { try { if (v) localStorage.setItem(THEME_KEY, v); else localStorage.removeItem(THEME_KEY); } catch (e) { /* private mode */ } }
  function systemDark() { return !!(window.matchMedia && matchMedia('(prefers-color-scheme: dark)').matches); }
  function themeShown() { var t = themeStored(); return t === 'dark' || t === 'light' ? t : systemDark() ? 'dark' : 'light'; }
  function themeApply() {
    var t = themeStored(), shown = themeShown(), b = document.getElementById('theme-button');
    if (t === 'dark' || t === 'light') document.documentElement.setAttribute('data-theme', t);
    else document.documentElement.removeAttribute('data-theme');
    if (!b) return;
    b.textContent = shown === 'dark' ? 'Light' : 'Dark';
    b.setAttribute('aria-pressed', String(shown === 'dark'));
    b.title = 'switch to the ' + (shown === 'dark' ? 'light' : 'dark') + ' theme (now ' + (t ? 'chosen here' : 'the system\'s') + ')';
  }
  function themeToggle() { /* back to following the system when the choice matches it */
    var next = themeShown() === 'dark' ? 'light' : 'dark';
    themeStore(next === (systemDark() ? 'dark' : 'light') ? null : next);
    themeApply();
  }
  function themeInit() {
    themeApply();
    var b = document.getElementById('theme-button');
    if (b) b.addEventListener('click', themeToggle);
    var mq = window.matchMedia && matchMedia('(prefers-color-scheme: dark)');
    if (mq && mq.addEventListener) mq.addEventListener('change', themeApply);
    else if (mq && mq.addListener) mq.addListener(themeApply); /* Safari before 14 */
    window.addEventListener('storage', (e) => { if (e.key === THEME_KEY) themeApply(); });
  }

  /* ---------- start ---------- */
  themeInit();
  if (!location.hash) history.replaceState(null, '', '#/overview');
  navigate();
})();
