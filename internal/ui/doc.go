// Package ui is delayq's web dashboard for operators: every topic with its
// scheduled, in-flight and dead counts, consumers, partition owners and
// lag; per topic its partitions, members, a chart of the messages due in
// each minute of the next hour and, when a worker serves it, the worker's
// delivery rates and lateness; messages looked up by id (deleted, run now
// or rescheduled), the next scheduled messages in due order, and the dead
// letters (requeued one by one or all, or purged).
//
// The worker serves it at /ui/ on its [http] listen address, and "delayq
// ui" on its own. Pages are rendered on the server with html/template;
// the stylesheet and a small script (live refresh and confirmations) are
// embedded with go:embed: no build step, no CDN.
//
// It uses the library's public API only: it reads with the
// delayq.Inspector of the client it is given (Options.Client) and acts
// with its Admin and message methods. Every read is a bounded number of
// pipelined one-key commands of the portable set (see the Inspector's
// ListTopics, ListScheduled, ListRecentDead, DueCounts and Consumers), so
// a topic of millions of messages costs Redis no more than one of ten.
//
// Security: with Options.Token set, the browser signs in with the token
// and gets an HttpOnly, SameSite=Strict session cookie. Every POST needs
// the session's CSRF token and a same-origin Origin header when it has
// one, and Options.ReadOnly hides and refuses every action. Message
// bodies, errors and ids are untrusted: the templates escape them and the
// Content-Security-Policy allows no inline script.
//
// Routes, under /ui/:
//
//	GET  /ui/                                   overview (live refresh)
//	GET  /ui/login, POST /ui/login, POST /ui/logout
//	GET  /ui/lookup?topic=T&id=ID               redirects to the message page
//	GET  /ui/topics/{topic}                     partitions, members, chart, worker figures
//	GET  /ui/topics/{topic}/message?id=ID       one message, with its actions
//	GET  /ui/topics/{topic}/message/body?id=ID  the raw body, as a download
//	GET  /ui/topics/{topic}/scheduled           next scheduled messages, paged
//	GET  /ui/topics/{topic}/dead                dead letters
//	GET  /ui/topics/{topic}/schedules           the topic's schedules, with their next occurrences
//	GET  /ui/topics/{topic}/export              the topic's export, as a download
//	POST /ui/topics/{topic}/message/{action}    delete, run, reschedule
//	POST /ui/topics/{topic}/dead/{action}       requeue, purge, requeue-all, purge-all
//	POST /ui/topics/{topic}/schedules/{action}  pause, resume, delete (form field name)
//	POST /ui/topics/{topic}/pause, .../resume   pause (for a duration, until a time, or until resumed), resume
//	POST /ui/topics/{topic}/limits, .../limits/clear  set or clear the topic's limits
//	POST /ui/topics/{topic}/delete              delete the topic
//	GET  /ui/static/...                         the stylesheet and the script
//
// Files:
//
//   - server.go: Options, Server, New and the routes
//   - auth.go: sessions, signing in and out, the CSRF and Origin checks
//   - render.go: the embedded templates and static files, and the
//     templates' helpers
//   - views.go: the reads of the overview and topic pages
//   - pages.go: the pages: overview, lookup, topic, message, scheduled,
//     dead
//   - actions.go: the actions (POSTs of forms), each confirmed
//   - body.go: a message body as the message page shows it
//   - chart.go: the topic page's chart of the messages due each minute
//   - figures.go: a worker's delivery rates and lateness (Counters,
//     Lateness, Rates)
//   - limits.go: a topic's limits, as its page shows and changes them
//   - schedules.go: the schedules page and its actions
//   - export.go: a topic's export, as a download
package ui
