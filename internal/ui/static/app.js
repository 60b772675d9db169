// delayq dashboard: asks before every action and refreshes the live part
// of a page. No library, no inline script (the Content-Security-Policy
// forbids it).
(function () {
  'use strict';

  // A form with data-confirm asks first; once confirmed it is sent with
  // confirm=yes, which the server requires (without this script, the
  // server asks on a page of its own).
  document.addEventListener('submit', function (e) {
    var form = e.target;
    var question = form.getAttribute('data-confirm');
    if (!question || form.querySelector('input[name="confirm"]')) {
      return;
    }
    e.preventDefault();
    if (!window.confirm(question)) {
      return;
    }
    var c = document.createElement('input');
    c.type = 'hidden';
    c.name = 'confirm';
    c.value = 'yes';
    form.appendChild(c);
    form.submit();
  });

  // The elements of class "live" are fetched again every data-refresh ms
  // while the page is visible: the server answers only those parts when
  // asked with X-Delayq-Fragment: live, each in an element of the same id.
  var regions = document.querySelectorAll('.live[id]');
  var conf = document.querySelector('.live[data-refresh]');
  if (!regions.length || !conf) {
    return;
  }
  var every = parseInt(conf.getAttribute('data-refresh'), 10) || 3000;
  var src = conf.getAttribute('data-src') || window.location.pathname + window.location.search;
  var busy = false;
  function mark(stale) {
    for (var i = 0; i < regions.length; i++) {
      regions[i].classList.toggle('stale', stale);
    }
  }
  function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(src, { headers: { 'X-Delayq-Fragment': 'live' }, credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) {
        if (r.status === 401) {
          window.location.reload(); // signed out: the page goes to the sign-in form
          throw new Error('signed out');
        }
        if (!r.ok) {
          throw new Error('HTTP ' + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        // DOMParser runs no script; the HTML is html/template output.
        var doc = new DOMParser().parseFromString(html, 'text/html');
        for (var i = 0; i < regions.length; i++) {
          var fresh = doc.getElementById(regions[i].id);
          if (fresh) {
            regions[i].innerHTML = fresh.innerHTML;
          }
        }
        mark(false);
        conf.setAttribute('data-refreshed', String(Date.now()));
      })
      .catch(function () {
        mark(true);
      })
      .then(function () {
        busy = false;
      });
  }
  window.setInterval(refresh, every);
})();
