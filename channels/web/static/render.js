/*
 * How a reply looks in a browser: the model's Markdown as HTML, and the drawn icons, for the
 * widget and the console alike. Served only inside a bundle that defines `marked`, `DOMPurify`
 * and `hljs` (channels/web/bundles.py), never on its own.
 *
 * Markdown is parsed by marked and every piece of HTML passes DOMPurify before it reaches the
 * page; raw HTML in a reply is shown as text, as it is on every other lane, links keep only
 * http(s) and mailto addresses, and images become links (a reply never loads anything by itself).
 * A streaming reply is re-lexed on each update and only the blocks whose source changed are
 * rendered again, so the finished blocks above it stay as they are (no flicker, no lost selection);
 * an open code block grows in place, and is highlighted once it is closed.
 */
var ChorusRender = (function (marked, DOMPurify, hljs) {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";
  // Icons are drawn, not typed: an emoji needs a font the visitor's system may not have
  // (a stock Chromium on Debian shows an empty box). Each is one path in a 24-unit square.
  var ICONS = {
    close: { path: "M6 6l12 12M18 6L6 18" },
    minimise: { path: "M5 12h14" },
    attach: { path: "M12 5v14M5 12h14" },
    microphone: { path: "M9 5a3 3 0 0 1 6 0v6a3 3 0 0 1-6 0zM6 11a6 6 0 0 0 12 0M12 17v4M9 21h6" },
    stop: { path: "M7 7h10v10H7z", filled: true },
    document: { path: "M6 3h8l4 4v14H6zM14 3v4h4M9 12h6M9 16h6" },
    audio: { path: "M9 18V6l10-2v12M9 18a2.5 2.5 0 1 1-5 0a2.5 2.5 0 0 1 5 0zM19 16a2.5 2.5 0 1 1-5 0a2.5 2.5 0 0 1 5 0z" },
    tool: { path: "M14.5 4.5a4.5 4.5 0 0 0-4.2 6.1L4 16.9a2.1 2.1 0 0 0 3 3l6.3-6.3a4.5 4.5 0 0 0 6.1-4.2l-2.6 2.6-2.8-.5-.5-2.8z" },
    asked: { path: "M12 21a9 9 0 1 0 0-18a9 9 0 0 0 0 18zM9.5 9.5a2.5 2.5 0 1 1 3.4 2.3c-.6.3-.9.8-.9 1.4v.8M12 17h.01" },
    failed: { path: "M12 3.5l9.5 16.5h-19zM12 10v4.5M12 17.5h.01" },
    denied: { path: "M12 21a9 9 0 1 0 0-18a9 9 0 0 0 0 18zM5.6 5.6l12.8 12.8" },
    thinking: { path: "M4 5h16v11h-9l-5 4v-4H4zM8.5 10.5h.01M12 10.5h.01M15.5 10.5h.01" },
    copy: { path: "M9 9h11v11H9zM15 9V4H4v11h5" },
    copied: { path: "M5 12.5l4.5 4.5L19 7" },
    menu: { path: "M4 6h16M4 12h16M4 18h16" },
  };

  // An icon; with a label it is an image with that accessible name, without one it is hidden
  // from assistive technology (the button or words beside it carry the meaning).
  function icon(name, label) {
    var shape = ICONS[name];
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "icon");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("focusable", "false");
    svg.setAttribute("data-icon", name);
    if (label) {
      svg.setAttribute("role", "img");
      svg.setAttribute("aria-label", label);
      var title = document.createElementNS(SVG, "title");
      title.textContent = label;
      svg.appendChild(title);
    } else {
      svg.setAttribute("aria-hidden", "true");
    }
    var path = document.createElementNS(SVG, "path");
    path.setAttribute("d", shape.path);
    path.setAttribute("fill", shape.filled ? "currentColor" : "none");
    path.setAttribute("stroke", "currentColor");
    path.setAttribute("stroke-width", "2");
    path.setAttribute("stroke-linecap", "round");
    path.setAttribute("stroke-linejoin", "round");
    svg.appendChild(path);
    return svg;
  }

  // --- sanitising ------------------------------------------------------------------
  // Only what the Markdown renderer below produces; everything else is dropped.
  var purify = DOMPurify(window);
  var POLICY = {
    ALLOWED_TAGS: [
      "a", "blockquote", "br", "code", "del", "div", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
      "input", "li", "ol", "p", "pre", "span", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
    ],
    ALLOWED_ATTR: ["href", "title", "class", "align", "start", "type", "checked", "disabled"],
    ALLOWED_URI_REGEXP: /^(?:https?|mailto):/i,
    RETURN_DOM_FRAGMENT: true,
  };
  purify.addHook("afterSanitizeAttributes", function (node) {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    } else if (node.tagName === "INPUT") {
      // A task list's box: shown, never a control.
      node.setAttribute("type", "checkbox");
      node.setAttribute("disabled", "");
    }
  });

  function clean(html) {
    return purify.sanitize(html, POLICY);
  }

  // --- Markdown --------------------------------------------------------------------
  function escapeHtml(text) {
    return String(text)
      .replace(/&/g, "&amp;")
      .replace(/</g, "&lt;")
      .replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;")
      .replace(/'/g, "&#39;");
  }

  // The fence's first word, as far as it can name a language.
  function languageOf(lang) {
    var word = String(lang || "").trim().split(/\s+/)[0].toLowerCase();
    return /^[\w+#.-]{1,32}$/.test(word) ? word : "";
  }

  var markdown = new marked.Marked({ gfm: true, breaks: true });
  markdown.use({
    renderer: {
      // Raw HTML is text in a chat (`List<String>`, `<br>` written about), never markup.
      // A block of it is a paragraph of its text, so it reads as the line it was written as.
      html: function (token) {
        if (token.block) {
          return "<p>" + escapeHtml(token.text.replace(/\s+$/, "")) + "</p>\n";
        }
        return escapeHtml(token.text);
      },
      code: function (token) {
        var language = languageOf(token.lang);
        return '<pre data-lang="' + language + '"><code>' + escapeHtml(token.text) + "</code></pre>\n";
      },
      // An image is a link to it: a reply must not make the browser fetch an address by itself
      // (a prompt-injected reply could carry data out in the image's URL).
      image: function (token) {
        var label = token.text || token.href;
        return '<a href="' + escapeHtml(token.href) + '">' + escapeHtml(label) + "</a>";
      },
      // A wide table scrolls within the reply instead of widening it.
      table: function (token) {
        return '<div class="table-wrap">' + marked.Renderer.prototype.table.call(this, token) + "</div>";
      },
      // A cell's words in a box as wide as they need up to a line's measure (render.css), so a
      // narrow reply scrolls the table instead of squeezing each column to a word.
      tablecell: function (token) {
        var tag = token.header ? "th" : "td";
        var align = token.align ? ' align="' + token.align + '"' : "";
        return "<" + tag + align + '><span class="cell">' + this.parser.parseInline(token.tokens) + "</span></" + tag + ">\n";
      },
    },
  });

  function htmlOf(token) {
    return markdown.parser([token]);
  }

  // --- code blocks ---------------------------------------------------------------------
  // A code block: the language and a copy button above the code. The code is set as text;
  // highlighting replaces it with the highlighter's markup, sanitised like the rest.
  function dressCode(pre) {
    var language = pre.getAttribute("data-lang") || "";
    var code = pre.querySelector("code") || pre.appendChild(document.createElement("code"));
    var block = document.createElement("div");
    block.className = "code-block";
    block.setAttribute("data-role", "code-block");
    var bar = document.createElement("div");
    bar.className = "code-bar";
    var name = document.createElement("span");
    name.className = "code-lang";
    name.textContent = language || "text";
    bar.appendChild(name);
    bar.appendChild(copyButton(code));
    pre.parentNode.replaceChild(block, pre);
    block.appendChild(bar);
    block.appendChild(pre);
    return block;
  }

  function copyButton(code) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "copy";
    button.setAttribute("data-role", "copy-code");
    button.setAttribute("aria-label", "Copy code");
    button.appendChild(icon("copy"));
    var reset = null;
    button.addEventListener("click", function () {
      copyText(code.textContent, button).then(function () {
        button.removeAttribute("data-copy-refused");
        button.removeAttribute("title");
        button.replaceChildren(icon("copied"));
        button.setAttribute("aria-label", "Copied");
        button.setAttribute("data-copied", "");
        clearTimeout(reset);
        reset = setTimeout(function () {
          button.replaceChildren(icon("copy"));
          button.setAttribute("aria-label", "Copy code");
          button.removeAttribute("data-copied");
        }, 1500);
      }, function () {
        // The browser refused (no clipboard permission, no selection): say so rather than
        // leave the person believing the code is on their clipboard.
        var refused = "Copy refused by the browser: select the code to copy it";
        button.replaceChildren(icon("copy"), noteOf("Copy refused: select the code"));
        button.setAttribute("aria-label", refused);
        button.setAttribute("title", refused);
        button.setAttribute("data-copy-refused", "");
      });
    });
    return button;
  }

  function noteOf(text) {
    var note = document.createElement("span");
    note.className = "copy-note";
    note.textContent = text;
    return note;
  }

  // The clipboard API where the page may use it (a secure page), else a selected text area.
  function copyText(text, near) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () {
        return copyBySelection(text, near);
      });
    }
    return copyBySelection(text, near);
  }

  function copyBySelection(text, near) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    near.parentNode.appendChild(area);
    area.select();
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } finally {
      area.parentNode.removeChild(area);
    }
    return copied ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  // Past this many characters (about 1,500 lines) a code block stays plain: highlighting and
  // sanitising the highlighter's markup grows with its size, and 5,000 lines would hold the
  // page's main thread for a second or more (bench/web_rendering.py).
  var HIGHLIGHT_LIMIT = 80000;

  function highlight(block) {
    var pre = block.querySelector("pre");
    var code = pre.querySelector("code");
    var language = pre.getAttribute("data-lang");
    if (!language || !hljs.getLanguage(language)) return;
    if (code.textContent.length > HIGHLIGHT_LIMIT) {
      block.setAttribute("data-plain", "too long to highlight");
      return;
    }
    var result = hljs.highlight(code.textContent, { language: language, ignoreIllegals: true });
    var scrolled = pre.scrollTop;
    code.replaceChildren(clean(result.value));
    code.classList.add("hljs");
    pre.scrollTop = scrolled;
  }

  // A code block by itself (a tool's arguments or result in the console): dressed and highlighted.
  function codeBlock(text, language) {
    var holder = document.createElement("div");
    var pre = document.createElement("pre");
    pre.setAttribute("data-lang", languageOf(language));
    var code = document.createElement("code");
    code.textContent = text;
    pre.appendChild(code);
    holder.appendChild(pre);
    var block = dressCode(pre);
    highlight(block);
    return block;
  }

  // --- a reply that grows ---------------------------------------------------------------
  // Each top-level block of the Markdown (a paragraph, a list, a code block …) with the
  // nodes it rendered to. An update renders again only the blocks from the first one whose
  // source changed; while a reply streams that is its last block.
  function Reply(container) {
    this.container = container;
    this.blocks = [];
    this.links = "{}";
    this.text = null;
    container.classList.add("md");
  }

  Reply.prototype.update = function (text, finished) {
    if (text === this.text && !finished) return;
    var tokens = markdown.lexer(text);
    // A reference definition arriving later changes blocks above it: then all render again.
    var links = JSON.stringify(tokens.links || {});
    var same = 0;
    if (links === this.links) {
      while (same < this.blocks.length && same < tokens.length && this.blocks[same].raw === source(tokens[same])) same++;
    }
    if (same === this.blocks.length - 1 && same === tokens.length - 1 && grows(this.blocks[same], tokens[same])) {
      extend(this.blocks[same], tokens[same]);
      same++;
    }
    for (var gone = this.blocks.length - 1; gone >= same; gone--) {
      this.blocks[gone].nodes.forEach(function (node) {
        if (node.parentNode) node.parentNode.removeChild(node);
      });
    }
    this.blocks.length = same;
    for (var index = same; index < tokens.length; index++) {
      var drawn = renderBlock(tokens[index], this.container);
      this.blocks.push(drawn);
      // A code block that opens as the reply streams shows its newest lines as they come.
      if (!finished && drawn.code && index === tokens.length - 1) followEnd(drawn.code.querySelector("pre"));
    }
    // A code block is highlighted once it is closed: once something follows it, or the reply ended.
    var closed = finished ? this.blocks.length : this.blocks.length - 1;
    for (var done = 0; done < closed; done++) {
      var block = this.blocks[done];
      if (block.code && !block.highlighted) {
        block.highlighted = true;
        highlight(block.code);
      }
    }
    this.text = text;
    this.links = links;
  };

  // A block's source without the blank lines after it, which arrive one by one and change nothing.
  function source(token) {
    return token.raw.replace(/\n+$/, "");
  }

  function renderBlock(token, container) {
    var fragment = clean(htmlOf(token));
    Array.prototype.slice.call(fragment.querySelectorAll("pre")).forEach(dressCode);
    var code = token.type === "code" ? fragment.querySelector(".code-block") : null;
    // The line breaks marked writes between blocks are not part of the reply's text.
    Array.prototype.slice.call(fragment.childNodes).forEach(function (node) {
      if (node.nodeType === Node.TEXT_NODE && !node.data.trim()) fragment.removeChild(node);
    });
    var nodes = Array.prototype.slice.call(fragment.childNodes);
    container.appendChild(fragment);
    return { raw: source(token), token: token, nodes: nodes, code: code, highlighted: false };
  }

  // The open code block at the end of a streaming reply, when only more code arrived.
  function grows(block, token) {
    return (
      block.code !== null && !block.highlighted && token.type === "code" &&
      languageOf(token.lang) === languageOf(block.token.lang) && token.text.indexOf(block.token.text) === 0
    );
  }

  function extend(block, token) {
    var pre = block.code.querySelector("pre");
    var code = pre.querySelector("code");
    var added = token.text.slice(block.token.text.length);
    // A code block taller than its box follows its newest line, unless the person scrolled up in it.
    var atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    if (added) {
      if (code.lastChild && code.lastChild.nodeType === Node.TEXT_NODE) code.lastChild.appendData(added);
      else code.appendChild(document.createTextNode(added));
    }
    if (atEnd) followEnd(pre);
    block.raw = source(token);
    block.token = token;
  }

  function followEnd(pre) {
    pre.scrollTop = pre.scrollHeight;
  }

  // A finished reply at once (history, the console).
  function render(container, text) {
    new Reply(container).update(text, true);
    return container;
  }

  return { icon: icon, Reply: Reply, render: render, codeBlock: codeBlock };
})(marked, DOMPurify, hljs);
