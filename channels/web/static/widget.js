/*
 * Chorus chat widget. Embed with one tag, no build step:
 *   <script src="https://chat.example.org/widget.js" data-title="Ask us" data-open="false"></script>
 * It talks to the server it was loaded from. What people write is only ever set as text
 * (textContent), never parsed as HTML; replies are Markdown, rendered by render.js (served in
 * the same script, see channels/web/bundles.py), which passes all HTML through DOMPurify.
 */
(function () {
  "use strict";

  var script = document.currentScript;
  if (!script || window.__chorusWidget) return;
  window.__chorusWidget = true;

  var BASE = new URL(".", script.src).href.replace(/\/$/, "");
  var SAME_ORIGIN = new URL(BASE).origin === window.location.origin;
  var TOKEN_KEY = "chorus:" + BASE + ":token";
  var TITLE = script.getAttribute("data-title") || "Chat";
  var START_OPEN = script.getAttribute("data-open") === "true";
  var HISTORY_PAGE = 30;
  var PUSH_RETRY_MS = 2000;
  // On a desktop the open panel docks in the corner and the page makes room for it
  // (data-dock="false" lets it float over the page instead).
  var DOCK = script.getAttribute("data-dock") !== "false";
  var DESKTOP = window.matchMedia("(min-width: 900px)");
  var PANEL_WIDTH = 380;
  var GAP = 20;

  var CSS = [
    ":host { all: initial; }",
    "* { box-sizing: border-box; }",
    ".launcher { position: fixed; right: 20px; bottom: 20px; z-index: 2147483000; border: 0; border-radius: 28px;",
    "  padding: 14px 20px; background: #3b4cca; color: #fff; font: 600 15px/1 system-ui, sans-serif;",
    "  box-shadow: 0 4px 16px rgba(0,0,0,.25); cursor: pointer; }",
    ".panel { position: fixed; right: 20px; bottom: 20px; z-index: 2147483001; width: 380px; height: 600px;",
    "  max-height: calc(100vh - 40px); display: flex; flex-direction: column; background: #fff; color: #1d1d1f;",
    "  border-radius: 14px; box-shadow: 0 8px 32px rgba(0,0,0,.28); overflow: hidden;",
    "  font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', sans-serif; }",
    ".panel[hidden], .launcher[hidden], [hidden] { display: none !important; }",
    "header { display: flex; align-items: center; gap: 8px; padding: 10px 12px; background: #3b4cca; color: #fff; }",
    "header .title { font-weight: 600; flex: 1; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }",
    "header select { max-width: 150px; font: inherit; border-radius: 6px; border: 0; padding: 4px; }",
    "header button { background: transparent; color: #fff; border: 0; cursor: pointer; padding: 2px; }",
    ".icon { display: block; width: 20px; height: 20px; flex: none; }",
    ".chip .icon { width: 14px; height: 14px; }",
    ".panel.minimised { height: auto; }",
    ".panel.minimised > :not(header) { display: none !important; }",
    ".panel.minimised header { cursor: pointer; }",
    ".msg.command { opacity: .85; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13px; }",
    // A command's answer keeps its layout: its columns line up in a fixed-width font.
    ".msg.notice.command-reply { align-self: stretch; max-width: none; font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo,",
    "  Consolas, 'DejaVu Sans Mono', monospace; overflow-x: auto; }",
    ".alert { padding: 8px 12px; background: #fdecea; color: #8a1c12; border-bottom: 1px solid #f5c2bd; font-size: 13px;",
    "  display: flex; gap: 8px; align-items: center; }",
    ".alert span { flex: 1; }",
    ".alert button, .retry, .earlier { font: inherit; font-size: 12px; border: 1px solid currentColor; background: #fff;",
    "  color: inherit; border-radius: 6px; padding: 2px 8px; cursor: pointer; }",
    ".log { flex: 1; overflow-y: auto; padding: 12px; display: flex; flex-direction: column; gap: 8px; background: #f6f7fb; }",
    ".earlier { align-self: center; color: #3b4cca; }",
    ".msg { max-width: 85%; padding: 8px 11px; border-radius: 12px; white-space: pre-wrap; overflow-wrap: anywhere; }",
    ".msg.user { align-self: flex-end; background: #3b4cca; color: #fff; border-bottom-right-radius: 4px; }",
    ".msg.assistant { align-self: flex-start; background: #fff; border: 1px solid #e2e4ee; border-bottom-left-radius: 4px; }",
    ".msg.notice { align-self: center; max-width: 95%; background: #eef0f8; color: #394060; font-size: 13px; }",
    ".msg.error { border-color: #f5c2bd; background: #fdecea; color: #8a1c12; }",
    ".msg .persona { font-size: 11px; font-weight: 700; color: #3b4cca; margin-bottom: 2px; text-transform: uppercase;",
    "  letter-spacing: .04em; white-space: normal; }",
    ".msg .tools { font-size: 12px; color: #5b6280; margin-bottom: 4px; white-space: normal; }",
    ".msg .tool { display: flex; align-items: center; gap: 5px; flex-wrap: wrap; }",
    ".msg .tool .icon, .msg .thinking .icon, .msg summary .icon { width: 14px; height: 14px; }",
    ".msg .tool[data-status=error], .msg .tool[data-status=denied] { color: #8a1c12; }",
    ".msg .status-note { font-size: 12px; opacity: .75; margin-top: 4px; }",
    ".msg .failure { margin-top: 6px; white-space: pre-wrap; }",
    ".msg .approval button { margin-left: 6px; font-size: 12px; }",
    // The cursor ends the text as it streams (inline, so the bubble keeps its height when it goes).
    ".msg.streaming .text:empty::after, .msg.streaming .md > p:last-child::after { content: '\\258D';",
    "  animation: blink 1s steps(2) infinite; }",
    ".msg .thinking { display: none; align-items: center; gap: 5px; opacity: 0.7; font-style: italic; font-size: 13px; }",
    ".msg[data-thinking] .thinking { display: flex; }",
    ".msg details.reasoning { opacity: 0.75; font-size: 0.9em; margin-bottom: 4px; white-space: pre-wrap; }",
    ".msg details.reasoning summary { cursor: pointer; display: flex; align-items: center; gap: 5px; }",
    "@keyframes blink { 50% { opacity: 0; } }",
    ".files { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 6px; }",
    ".files img { max-width: 160px; max-height: 160px; border-radius: 8px; display: block; }",
    ".chip { display: inline-flex; align-items: center; gap: 4px; font-size: 12px; padding: 3px 8px; border-radius: 10px;",
    "  background: rgba(0,0,0,.08); color: inherit; border: 0; cursor: pointer; white-space: nowrap; }",
    ".msg.user .chip { background: rgba(255,255,255,.2); }",
    ".pending { display: flex; flex-wrap: wrap; gap: 6px; padding: 6px 10px 0; background: #fff; }",
    ".pending .item { position: relative; }",
    ".pending img { width: 56px; height: 56px; object-fit: cover; border-radius: 8px; display: block; }",
    ".pending .remove { position: absolute; top: -6px; right: -6px; width: 20px; height: 20px; border-radius: 10px;",
    "  border: 0; background: #333; color: #fff; cursor: pointer; padding: 3px; }",
    ".pending .remove .icon { width: 14px; height: 14px; }",
    "form { display: flex; gap: 6px; align-items: flex-end; padding: 8px 10px 10px; background: #fff; border-top: 1px solid #e2e4ee; }",
    "textarea { flex: 1; resize: none; font: inherit; padding: 8px; border: 1px solid #cfd3e3; border-radius: 10px;",
    "  min-height: 38px; max-height: 120px; }",
    "form button { font: inherit; border: 0; border-radius: 10px; padding: 9px 12px; cursor: pointer; }",
    ".attach, .mic { display: inline-flex; align-items: center; gap: 4px; background: #eef0f8; color: #3b4cca; }",
    ".mic.recording { background: #8a1c12; color: #fff; }",
    ".files audio, .spoken audio { display: block; width: 220px; height: 36px; margin-top: 4px; }",
    ".send { background: #3b4cca; color: #fff; font-weight: 600; }",
    ".send:disabled { opacity: .5; cursor: default; }",
    ".stop { background: #8a1c12; color: #fff; font-weight: 600; }",
    "@media (max-width: 480px) {",
    "  .panel { right: 0; bottom: 0; width: 100vw; height: 100%; max-height: none; border-radius: 0; }",
    "  .launcher { right: 12px; bottom: 12px; }",
    "  .msg { max-width: 92%; }",
    "}",
  ].join("\n");

  // --- tiny DOM helper: attributes and text only, never HTML --------------------
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      var value = attrs[name];
      if (value === null || value === undefined || value === false) return;
      if (name === "text") node.textContent = value;
      else if (name.slice(0, 2) === "on") node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    });
    (children || []).forEach(function (child) {
      if (child) node.appendChild(child);
    });
    return node;
  }

  // Drawn icons (render.js): in a button the button's name says what it does.
  var icon = ChorusRender.icon;
  // What a tool call's line shows before its words, by the call's state.
  var TOOL_ICONS = {
    asked: ["asked", "Waiting for a yes or no"],
    error: ["failed", "Failed"],
    denied: ["denied", "Not run"],
  };

  // An icon and, after it, words (a file's name, a recording's length), as text.
  function iconWith(name, text) {
    return [icon(name), text ? document.createTextNode(text) : null];
  }

  function showOn(node, children) {
    node.textContent = "";
    children.forEach(function (child) {
      if (child) node.appendChild(child);
    });
  }

  function newId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID().replace(/-/g, "");
    return Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  // --- server access ------------------------------------------------------------
  function storedToken() {
    try {
      return SAME_ORIGIN ? null : window.localStorage.getItem(TOKEN_KEY);
    } catch (error) {
      return null;
    }
  }

  function storeToken(token) {
    // On the server's own pages the HttpOnly cookie carries the token; elsewhere the bearer does.
    if (SAME_ORIGIN || !token) return;
    try {
      window.localStorage.setItem(TOKEN_KEY, token);
    } catch (error) {
      /* private mode: the visitor starts over after a reload */
    }
  }

  function RequestFailed(message, status) {
    this.message = message;
    this.status = status;
  }

  function request(path, options) {
    options = options || {};
    var headers = options.headers || {};
    var token = storedToken();
    if (token) headers["Authorization"] = "Bearer " + token;
    return fetch(BASE + path, {
      method: options.method || "GET",
      headers: headers,
      body: options.body,
      signal: options.signal,
      credentials: SAME_ORIGIN ? "same-origin" : "omit",
    }).then(
      function (response) {
        if (response.ok) return response;
        return response
          .json()
          .catch(function () {
            return {};
          })
          .then(function (body) {
            var detail = typeof body.detail === "string" ? body.detail : "The request failed (HTTP " + response.status + ").";
            throw new RequestFailed(detail, response.status);
          });
      },
      function () {
        throw new RequestFailed("Can't reach the chat server at " + BASE + ". Check your connection and try again.", 0);
      }
    );
  }

  function requestJson(path, options) {
    return request(path, options).then(function (response) {
      return response.json();
    });
  }

  function postJson(path, body) {
    return requestJson(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  }

  // Reads a text/event-stream body, calling onEvent(name, data) for each event.
  function readEvents(response, onEvent) {
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    function dispatch(block) {
      var name = "message";
      var data = [];
      block.split("\n").forEach(function (line) {
        if (line.indexOf("event:") === 0) name = line.slice(6).trim();
        else if (line.indexOf("data:") === 0) data.push(line.slice(5).replace(/^ /, ""));
      });
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
    function pump() {
      return reader.read().then(function (chunk) {
        if (chunk.done) return;
        buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n/g, "\n");
        var end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          dispatch(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
        return pump();
      });
    }
    return pump();
  }

  // --- the widget ---------------------------------------------------------------
  var state = { pushAfter: null, pushing: null, sessionId: null, persona: null, personas: [], limits: null, nextBefore: null, pending: [], sending: false, loading: false, recorder: null };

  var host = el("div", { id: "chorus-widget" });
  var root = host.attachShadow({ mode: "open" });
  root.appendChild(el("style", { text: RENDER_CSS + "\n" + CSS }));

  var launcher = el("button", { class: "launcher", type: "button", "aria-label": "Open chat", text: TITLE, onclick: open });
  var titleNode = el("span", { class: "title", text: TITLE });
  var personaPicker = el("select", { class: "persona-picker", "aria-label": "Persona", onchange: switchPersona });
  var closeButton = el("button", { type: "button", "aria-label": "Close chat", onclick: close }, [icon("close")]);
  var minimiseButton = el("button", { class: "minimise", type: "button", "aria-label": "Minimise chat", onclick: toggleMinimised }, [icon("minimise")]);
  var alertText = el("span");
  var alertRetry = el("button", { type: "button", text: "Retry", hidden: true });
  var alertBox = el("div", { class: "alert", role: "alert", hidden: true }, [alertText, alertRetry]);
  var earlierButton = el("button", { class: "earlier", type: "button", text: "Earlier messages", hidden: true, onclick: loadEarlier });
  var log = el("div", { class: "log", role: "log", "aria-live": "polite" }, [earlierButton]);
  var pendingStrip = el("div", { class: "pending", hidden: true });
  var fileInput = el("input", { type: "file", multiple: true, hidden: true, onchange: addFiles });
  var attachButton = el("button", { class: "attach", type: "button", "aria-label": "Attach files", onclick: function () { fileInput.click(); } }, [icon("attach")]);
  // Shown only where the browser can record (MediaRecorder, a microphone API, a secure page).
  var micButton = el("button", {
    class: "mic",
    type: "button",
    "aria-label": "Record a voice message",
    hidden: !(navigator.mediaDevices && navigator.mediaDevices.getUserMedia && window.MediaRecorder),
    onclick: toggleRecording,
  }, [icon("microphone")]);
  var textarea = el("textarea", { rows: 1, placeholder: "Write a message\u2026", "aria-label": "Message", onkeydown: onKey });
  var sendButton = el("button", { class: "send", type: "submit", text: "Send" });
  var stopButton = el("button", { class: "stop", type: "button", text: "Stop", "aria-label": "Stop the reply", hidden: true, onclick: stopReply });
  var form = el("form", { onsubmit: function (event) { event.preventDefault(); send(); } }, [attachButton, fileInput, micButton, textarea, sendButton, stopButton]);
  var panel = el("section", { class: "panel", role: "dialog", "aria-label": TITLE, hidden: true }, [
    el("header", { onclick: function (event) { if (event.target === titleNode && minimised()) toggleMinimised(); } }, [titleNode, personaPicker, minimiseButton, closeButton]),
    alertBox,
    log,
    pendingStrip,
    form,
  ]);
  root.appendChild(launcher);
  root.appendChild(panel);

  function open() {
    panel.hidden = false;
    launcher.hidden = true;
    panel.classList.remove("minimised");
    dock();
    textarea.focus();
  }

  function close() {
    panel.hidden = true;
    launcher.hidden = false;
    dock();
  }

  function minimised() {
    return panel.classList.contains("minimised");
  }

  function toggleMinimised() {
    panel.classList.toggle("minimised");
    minimiseButton.setAttribute("aria-label", minimised() ? "Restore chat" : "Minimise chat");
    dock();
    if (!minimised()) scrollDown();
  }

  // The open panel takes a column at the page's right edge, so it covers none of the page.
  var pageMargin = null;
  function dock() {
    var docked = DOCK && DESKTOP.matches && !panel.hidden && !minimised();
    if (docked && pageMargin === null) {
      pageMargin = document.body.style.marginRight;
      document.body.style.marginRight = PANEL_WIDTH + 2 * GAP + "px";
    } else if (!docked && pageMargin !== null) {
      document.body.style.marginRight = pageMargin;
      pageMargin = null;
    }
    host.toggleAttribute("data-docked", docked);
  }
  DESKTOP.addEventListener("change", dock);

  function showAlert(message, retry) {
    alertText.textContent = message;
    alertRetry.hidden = !retry;
    alertRetry.onclick = retry
      ? function () {
          hideAlert();
          retry();
        }
      : null;
    alertBox.hidden = false;
  }

  function hideAlert() {
    alertBox.hidden = true;
  }

  function nearBottom() {
    return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  }

  // Whether the view follows the newest message: true until the person scrolls up.
  // Content that grows later (an image that finished loading) keeps it at the bottom.
  var following = true;
  log.addEventListener("scroll", function () {
    following = nearBottom();
  });

  function scrollDown() {
    log.scrollTop = log.scrollHeight;
    following = true;
  }

  function keepFollowing() {
    if (following) scrollDown();
  }

  // --- session and history --------------------------------------------------------
  function start() {
    return postJson("/api/session", {})
      .then(function (session) {
        storeToken(session.token);
        applySession(session);
        hideAlert();
        return loadHistory(true).then(listenForPushes);
      })
      .catch(function (error) {
        showAlert(error.message, start);
      });
  }

  function applySession(session) {
    var changed = state.sessionId !== session.session_id;
    state.sessionId = session.session_id;
    state.persona = session.persona;
    state.personas = session.personas;
    state.limits = session.limits;
    fileInput.setAttribute("accept", session.limits.accepted_types.join(","));
    personaPicker.textContent = "";
    session.personas.forEach(function (persona) {
      personaPicker.appendChild(el("option", { value: persona.id, text: persona.name, selected: persona.id === session.persona.id }));
    });
    personaPicker.value = session.persona.id;
    return changed;
  }

  function refreshSession() {
    return requestJson("/api/session")
      .then(function (session) {
        if (applySession(session)) return loadHistory(true).then(listenForPushes);
      })
      .catch(function (error) {
        showAlert(error.message, refreshSession);
      });
  }

  function loadHistory(fresh) {
    var query = "?limit=" + HISTORY_PAGE + (!fresh && state.nextBefore ? "&before=" + state.nextBefore : "");
    // A fresh load replaces the whole log: sending waits for it, or the reply being
    // streamed would be wiped when the history arrives.
    if (fresh) setLoading(true);
    return requestJson("/api/sessions/" + state.sessionId + "/messages" + query).then(function (page) {
      if (fresh) {
        while (log.lastChild !== earlierButton) log.removeChild(log.lastChild);
      }
      var anchor = earlierButton.nextSibling;
      if (fresh) state.pushAfter = page.messages.length ? page.messages[page.messages.length - 1].seq : 0;
      page.messages.forEach(function (message) {
        log.insertBefore(storedBubble(message), anchor);
      });
      if (fresh && !page.messages.length && state.persona.greeting) {
        log.appendChild(noticeBubble(state.persona.name + ": " + state.persona.greeting));
      }
      state.nextBefore = page.next_before;
      earlierButton.hidden = !page.next_before;
      if (fresh) scrollDown();
    }).finally(function () {
      if (fresh) setLoading(false);
    });
  }

  // Reminders arrive without the visitor asking: one stream per session stays open and
  // reconnects after a drop, asking for what was stored after the last seq it saw.
  function listenForPushes() {
    if (state.pushing) state.pushing.abort();
    var sessionId = state.sessionId;
    var controller = new AbortController();
    state.pushing = controller;
    function reconnect() {
      if (state.pushing !== controller) return;
      setTimeout(function () {
        if (state.pushing === controller) connect();
      }, PUSH_RETRY_MS);
    }
    function connect() {
      var query = state.pushAfter !== null ? "?after=" + state.pushAfter : "";
      request("/api/sessions/" + sessionId + "/events" + query, { signal: controller.signal })
        .then(function (response) {
          return readEvents(response, function (name, data) {
            if (name === "reminder") showPushed(data.message);
          });
        })
        .then(reconnect, reconnect);
    }
    connect();
  }

  function showPushed(message) {
    state.pushAfter = Math.max(state.pushAfter || 0, message.seq);
    if (log.querySelector('[data-message-id="' + message.id + '"]')) return;
    var node = storedBubble(message);
    node.setAttribute("data-event", "reminder");
    log.appendChild(node);
    keepFollowing();
  }

  function loadEarlier() {
    loadHistory(false).catch(function (error) {
      showAlert(error.message, loadEarlier);
    });
  }

  // --- bubbles ------------------------------------------------------------------
  function bubble(author, personaName) {
    var text = el("div", { class: "text" });
    var assistant = author === "assistant";
    var node = el("div", { class: "msg " + author, "data-role": "message", "data-author": author }, [
      assistant ? el("div", { class: "persona", text: personaName || "" }) : null,
      text,
      // Shown while the model thinks before (or between) its words.
      assistant ? el("div", { class: "thinking", "data-role": "thinking" }, iconWith("thinking", "thinking\u2026")) : null,
    ]);
    node.textNode = text;
    node.streamed = "";
    return node;
  }

  // A reply's Markdown on screen; while it streams, only its changed blocks are drawn again.
  function showMarkdown(node, text, finished) {
    if (!node.markdown) node.markdown = new ChorusRender.Reply(node.textNode);
    node.markdown.update(text, finished);
  }

  // Deltas arrive faster than a screen refreshes: one drawing per frame, of all that arrived.
  function drawSoon(reply) {
    if (reply.frame) return;
    reply.frame = requestAnimationFrame(function () {
      reply.frame = null;
      showMarkdown(reply, reply.streamed, false);
      keepFollowing();
    });
  }

  function drawNow(reply, text) {
    if (reply.frame) cancelAnimationFrame(reply.frame);
    reply.frame = null;
    showMarkdown(reply, text, true);
  }

  function storedBubble(message) {
    if (message.role === "system") return eventBubble(message);
    var node = bubble(message.role, message.persona_name);
    if (message.role === "assistant") showMarkdown(node, message.text, true);
    else node.textNode.textContent = message.text;
    node.setAttribute("data-message-id", message.id);
    if (message.persona_id) node.setAttribute("data-persona-id", message.persona_id);
    if (message.status !== "complete") node.appendChild(el("div", { class: "status-note", text: "[" + message.status + "]" }));
    if (message.attachments.length) {
      node.appendChild(el("div", { class: "files" }, message.attachments.map(storedFile)));
    }
    return node;
  }

  // The model's thinking (after /reasoning on), folded: a click opens it.
  function reasoningFold(text) {
    return el("details", { class: "reasoning", "data-role": "reasoning" }, [
      el("summary", {}, iconWith("thinking", "Thinking")),
      el("div", { class: "reasoning-text", text: text }),
    ]);
  }

  function noticeBubble(text, isError) {
    return el("div", { class: "msg notice" + (isError ? " error" : ""), "data-role": "notice", text: text });
  }

  // A stored event: a command as the person typed it, or a notice (answers, persona switches, errors).
  function eventBubble(message) {
    if (message.event === "reasoning") {
      return el("div", { class: "msg assistant", "data-event": "reasoning", "data-message-id": message.id }, [
        reasoningFold(message.text),
      ]);
    }
    if (message.event === "command") {
      return el("div", { class: "msg user command", "data-role": "command", "data-event": "command", "data-message-id": message.id, text: message.text });
    }
    if (message.event === "tool") {
      // The calls of a reply, as its lines showed them while it streamed.
      return el("div", { class: "msg notice", "data-role": "notice", "data-event": "tool", "data-message-id": message.id },
        message.tools.map(function (call) {
          return toolLine(call.call_id, call.status, call.label);
        }));
    }
    var node = noticeBubble(message.text, message.event === "error");
    if (message.event === "command_reply") node.classList.add("command-reply");
    node.setAttribute("data-event", message.event);
    node.setAttribute("data-message-id", message.id);
    return node;
  }

  function storedFile(file) {
    if (file.kind === "voice" || file.kind === "audio") return audioPlayer(file.url, file.filename);
    if (file.kind === "image") {
      var image = el("img", { alt: file.filename, onload: keepFollowing });
      // Fetched with the visitor's token (an <img src> could not send it), shown as a blob.
      request(file.url)
        .then(function (response) {
          return response.blob();
        })
        .then(function (blob) {
          image.src = URL.createObjectURL(blob);
        })
        .catch(function () {
          image.alt = file.filename + " (could not load)";
        });
      return image;
    }
    return el("button", {
      class: "chip",
      type: "button",
      "aria-label": "Download " + file.filename,
      onclick: function () {
        download(file);
      },
    }, iconWith("document", file.filename));
  }

  function download(file) {
    request(file.url)
      .then(function (response) {
        return response.blob();
      })
      .then(function (blob) {
        var link = el("a", { href: URL.createObjectURL(blob), download: file.filename });
        link.click();
        setTimeout(function () {
          URL.revokeObjectURL(link.href);
        }, 10000);
      })
      .catch(function (error) {
        showAlert(error.message);
      });
  }

  // A player for audio on the server, fetched with the visitor's token (an <audio src> could not send it).
  function audioPlayer(path, label) {
    var player = el("audio", { controls: true, preload: "metadata", "aria-label": label, "data-role": "audio" });
    request(path)
      .then(function (response) {
        return response.blob();
      })
      .then(function (blob) {
        player.src = URL.createObjectURL(blob);
        player.setAttribute("data-loaded", "");
        keepFollowing();
      })
      .catch(function (error) {
        player.setAttribute("data-failed", "");
        player.setAttribute("title", error.message);
      });
    return player;
  }

  function pendingFile(file) {
    if (file.type.indexOf("image/") === 0) return el("img", { src: URL.createObjectURL(file), alt: file.name });
    return el("span", { class: "chip" }, iconWith(file.type.indexOf("audio/") === 0 ? "audio" : "document", file.name));
  }

  // --- attachments --------------------------------------------------------------
  function addFiles() {
    var limits = state.limits;
    Array.prototype.forEach.call(fileInput.files, function (file) {
      if (limits && state.pending.length >= limits.max_files) {
        showAlert("Attach at most " + limits.max_files + " files to one message.");
      } else if (limits && file.size > limitFor(file)) {
        showAlert("'" + file.name + "' is too large; the limit is " + (limitFor(file) / 1048576).toFixed(1) + " MB.");
      } else {
        state.pending.push(file);
      }
    });
    fileInput.value = "";
    renderPending();
  }

  function limitFor(file) {
    return file.type.indexOf("audio/") === 0 ? state.limits.max_audio_bytes : state.limits.max_file_bytes;
  }

  // --- voice messages: recorded in the browser, sent when the recording stops ---
  function toggleRecording() {
    if (state.recorder) {
      state.recorder.stop();
      return;
    }
    if (state.sending || state.loading || !state.sessionId) return;
    navigator.mediaDevices
      .getUserMedia({ audio: true })
      .then(startRecording)
      .catch(function (error) {
        showAlert("The microphone is not available (" + (error.message || error.name) + ").");
      });
  }

  function startRecording(stream) {
    var type = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/webm"].filter(function (candidate) {
      return MediaRecorder.isTypeSupported(candidate);
    })[0];
    var recorder = new MediaRecorder(stream, type ? { mimeType: type } : undefined);
    var chunks = [];
    var startedAt = Date.now();
    var limitMs = state.limits ? state.limits.max_audio_seconds * 1000 : 600000;
    // A recording stops by itself at the longest one the server takes.
    var cutOff = setTimeout(function () {
      if (recorder.state !== "inactive") recorder.stop();
    }, limitMs);
    recorder.ondataavailable = function (event) {
      if (event.data.size) chunks.push(event.data);
      // The button shows how long the recording is so far.
      showOn(micButton, iconWith("stop", clock((Date.now() - startedAt) / 1000)));
    };
    recorder.onstop = function () {
      clearTimeout(cutOff);
      stream.getTracks().forEach(function (track) {
        track.stop();
      });
      state.recorder = null;
      micButton.classList.remove("recording");
      showOn(micButton, [icon("microphone")]);
      micButton.setAttribute("aria-label", "Record a voice message");
      var mime = (recorder.mimeType || "audio/webm").split(";")[0];
      var blob = new Blob(chunks, { type: mime });
      if (blob.size) sendRecording(new File([blob], "voice-message." + (mime === "audio/ogg" ? "ogg" : "webm"), { type: mime }));
    };
    state.recorder = recorder;
    micButton.classList.add("recording");
    micButton.setAttribute("aria-label", "Stop recording and send");
    recorder.start(250);
  }

  function clock(seconds) {
    var whole = Math.floor(seconds);
    return Math.floor(whole / 60) + ":" + ("0" + (whole % 60)).slice(-2);
  }

  function sendRecording(file) {
    var mine = bubble("user");
    mine.setAttribute("data-voice", "");
    mine.appendChild(el("div", { class: "files" }, [
      el("audio", { controls: true, src: URL.createObjectURL(file), "aria-label": "Your voice message" }),
    ]));
    log.appendChild(mine);
    scrollDown();
    deliver("", [], newId(), mine, [file]);
  }

  function renderPending() {
    pendingStrip.textContent = "";
    state.pending.forEach(function (file, index) {
      pendingStrip.appendChild(
        el("div", { class: "item", "data-role": "pending-file" }, [
          pendingFile(file),
          el("button", {
            class: "remove",
            type: "button",
            "aria-label": "Remove " + file.name,
            onclick: function () {
              state.pending.splice(index, 1);
              renderPending();
            },
          }, [icon("close")]),
        ])
      );
    });
    pendingStrip.hidden = !state.pending.length;
  }

  // --- sending ------------------------------------------------------------------
  function onKey(event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  }

  function send() {
    var text = textarea.value;
    var files = state.pending.slice();
    if (state.sending || state.loading || !state.sessionId || (!text.trim() && !files.length)) return;
    textarea.value = "";
    state.pending = [];
    renderPending();
    var mine = bubble("user");
    mine.textNode.textContent = text;
    if (files.length) mine.appendChild(el("div", { class: "files" }, files.map(pendingFile)));
    log.appendChild(mine);
    scrollDown();
    deliver(text, files, newId(), mine);
  }

  // One attempt to deliver a message; a retry reuses client_id so it is stored once.
  function deliver(text, files, clientId, mine, recordings) {
    var form = new FormData();
    form.append("text", text);
    form.append("client_id", clientId);
    files.forEach(function (file) {
      form.append("files", file, file.name);
    });
    (recordings || []).forEach(function (file) {
      form.append("voice", file, file.name);
    });
    var reply = bubble("assistant", state.persona && state.persona.name);
    reply.classList.add("streaming");
    log.appendChild(reply);
    scrollDown();
    setSending(true);
    var finished = false;
    function retry() {
      if (reply.parentNode) reply.parentNode.removeChild(reply);
      deliver(text, files, clientId, mine, recordings);
    }
    return request("/api/sessions/" + state.sessionId + "/messages", { method: "POST", body: form })
      .then(function (response) {
        hideAlert();
        return readEvents(response, function (name, data) {
          if (name === "delta") {
            reply.removeAttribute("data-thinking");
            reply.streamed += data.text;
            drawSoon(reply);
          } else if (name === "thinking") {
            // The model thinks before (or between) its words: the bubble says so instead of a blank.
            reply.setAttribute("data-thinking", "");
          } else if (name === "tool") {
            reply.removeAttribute("data-thinking");
            showToolStep(reply, data);
          } else {
            finished = true;
            finishReply(reply, name, data);
            if (data.kind === "command") {
              mine.classList.add("command");
              mine.setAttribute("data-role", "command");
            }
          }
          keepFollowing();
        });
      })
      .then(function () {
        if (!finished) throw new RequestFailed("The connection dropped before the reply finished.", 0);
      })
      .catch(function (error) {
        reply.classList.remove("streaming");
        if (error.status === 409) {
          reply.parentNode.removeChild(reply);
          showAlert(error.message);
          return refreshSession();
        }
        if (finished) return;
        reply.classList.add("error");
        reply.removeAttribute("data-thinking");
        reply.querySelector(".persona").textContent = "";
        // What arrived stays; the reason follows it.
        drawNow(reply, reply.streamed);
        reply.appendChild(el("div", { class: "failure", text: error.message }));
        // A refusal (bad file, too large, not allowed) fails the same way again: no Retry.
        if (retryable(error.status)) {
          reply.appendChild(el("button", { class: "retry", type: "button", text: "Retry", onclick: retry }));
        }
        showAlert(error.message, retryable(error.status) && error.status !== 429 ? retry : null);
      })
      .then(function () {
        setSending(false);
      });
  }

  // A tool call starting or ending: one line per call above the answer. The text streamed
  // before a call belonged to its tool round; the answer streams anew after the last step.
  function showToolStep(reply, step) {
    if (!reply.toolsNode) {
      reply.toolsNode = el("div", { class: "tools", "data-role": "tools" });
      reply.insertBefore(reply.toolsNode, reply.textNode);
    }
    if (step.status === "started") {
      reply.streamed = "";
      drawNow(reply, "");
    }
    reply.toolLines = reply.toolLines || Object.create(null);
    var line = toolLine(step.call_id, step.status, step.label);
    if (step.status === "asked" && step.approval_id) line.appendChild(approvalButtons(step.approval_id));
    if (reply.toolLines[step.call_id]) reply.toolsNode.replaceChild(line, reply.toolLines[step.call_id]);
    else reply.toolsNode.appendChild(line);
    reply.toolLines[step.call_id] = line;
  }

  // One call: a drawn mark of its state (never an emoji), then its words ("recall: dentist · 2/4").
  function toolLine(callId, status, label) {
    var mark = TOOL_ICONS[status] || ["tool", "Tool call"];
    return el("div", { class: "tool", "data-call-id": callId, "data-status": status }, [
      icon(mark[0], mark[1]),
      el("span", { class: "label", text: label }),
    ]);
  }

  // A call waiting for the visitor's yes or no: Run and Deny, answered once.
  function approvalButtons(approvalId) {
    var answered = el("span", { class: "answered", "data-role": "approval-answer" });
    var buttons = el("span", { class: "approval", "data-role": "approval" });
    function answer(approve) {
      Array.prototype.forEach.call(buttons.querySelectorAll("button"), function (button) {
        button.disabled = true;
      });
      request("/api/sessions/" + state.sessionId + "/approvals/" + approvalId, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ approve: approve }),
      })
        .then(function (response) {
          return response.json();
        })
        .then(function (result) {
          answered.textContent = " " + result.text;
        })
        .catch(function (error) {
          showAlert(error.message);
        });
    }
    buttons.appendChild(el("button", { type: "button", class: "approve", "data-role": "approve", text: "Run", onclick: function () { answer(true); } }));
    buttons.appendChild(el("button", { type: "button", class: "deny", "data-role": "deny", text: "Deny", onclick: function () { answer(false); } }));
    buttons.appendChild(answered);
    return buttons;
  }

  function retryable(status) {
    return status === 0 || status === 408 || status === 429 || status >= 500;
  }

  function stopReply() {
    stopButton.disabled = true;
    request("/api/sessions/" + state.sessionId + "/stop", { method: "POST" }).catch(function (error) {
      showAlert(error.message);
    });
  }

  function finishReply(reply, name, data) {
    reply.classList.remove("streaming");
    reply.removeAttribute("data-thinking");
    if (data.reasoning) reply.insertBefore(reasoningFold(data.reasoning), reply.textNode);
    if (data.status) reply.setAttribute("data-status", data.status);
    if (data.status === "stopped") reply.classList.add("stopped");
    if (data.message_id) reply.setAttribute("data-message-id", data.message_id);
    if (data.persona_id) reply.setAttribute("data-persona-id", data.persona_id);
    reply.querySelector(".persona").textContent = data.persona_name || "";
    // A command's answer is shown as written (its columns line up); a reply is Markdown.
    if (data.kind === "command") reply.textNode.textContent = data.text;
    else drawNow(reply, data.text);
    if (data.speech && data.speech.length) {
      reply.appendChild(el("div", { class: "spoken", "data-role": "spoken-reply" }, data.speech.map(function (path, index) {
        return audioPlayer(path, "The reply, spoken" + (data.speech.length > 1 ? " (part " + (index + 1) + ")" : ""));
      })));
    }
    if (name === "error") {
      reply.classList.add("error");
    } else if (data.kind === "command") {
      reply.className = "msg notice command-reply";
      reply.setAttribute("data-role", "notice");
      reply.removeAttribute("data-author");
      refreshSession();
    }
  }

  function setSending(sending) {
    state.sending = sending;
    sendButton.disabled = sending || state.loading;
    // While a reply streams, Stop takes the place of Send.
    sendButton.hidden = sending;
    stopButton.hidden = !sending;
    micButton.disabled = sending && !state.recorder;
    stopButton.disabled = false;
  }

  function setLoading(loading) {
    state.loading = loading;
    sendButton.disabled = loading || state.sending;
    // Lets embedding pages (and tests) know the conversation is on screen.
    if (loading) host.removeAttribute("data-ready");
    else host.setAttribute("data-ready", "");
  }

  // --- persona picker -----------------------------------------------------------
  function switchPersona() {
    var chosen = personaPicker.value;
    postJson("/api/sessions/" + state.sessionId + "/persona", { persona_id: chosen })
      .then(function (result) {
        state.persona = result.persona;
        log.appendChild(noticeBubble(result.text));
        scrollDown();
      })
      .catch(function (error) {
        personaPicker.value = state.persona.id;
        showAlert(error.message);
        if (error.status === 409) refreshSession();
      });
  }

  function mount() {
    document.body.appendChild(host);
    if (START_OPEN) open();
    start();
  }

  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount);
})();
