// chat.js is the demo's chat: the conversation view (replies rendered as
// Markdown, a reasoning model's thinking apart), Stop and Regenerate beside
// the reply, and the conversations kept in IndexedDB (store.js) with a list
// to switch between them and delete them, and images in a user's message
// (picked, pasted or dropped; sent as image_url parts of data URLs to a
// model loaded with a vision projector). app.js owns the engine and the
// settings and hands them in as `page`.
import { render } from "./md.js";
import { ConversationStore, newConversation, titleOf } from "./store.js";

export class Chat {
  // page: {el, demo, ensureLoaded(), generate(input, view) → stats,
  // settings() → request fields, showError(err), say(text), busy()}.
  constructor(page) {
    this.page = page;
    this.el = page.el;
    this.store = null;
    this.conv = newConversation();
    this.pending = null; // the assistant message being written: {msg, view}
    this.images = []; // data URLs of the images the next message carries
    this.el.imageFile.addEventListener("change", () => {
      this.addImages(this.el.imageFile.files);
      this.el.imageFile.value = "";
    });
    this.el.chatInput.addEventListener("paste", (ev) => {
      const files = Array.from((ev.clipboardData && ev.clipboardData.files) || []).filter((f) => f.type.startsWith("image/"));
      if (!files.length) return;
      ev.preventDefault();
      this.addImages(files);
    });
  }

  // addImages reads image files into the next message, shown above the
  // message box until it is sent. Only PNG, JPEG and WebP are taken: what
  // the engine decodes.
  async addImages(files) {
    for (const f of Array.from(files || [])) {
      if (!/^image\/(png|jpeg|webp)$/.test(f.type)) {
        this.page.say(`${f.name} is not a PNG, JPEG or WebP image.`);
        continue;
      }
      try {
        this.images.push(await new Promise((resolve, reject) => {
          const r = new FileReader();
          r.onload = () => resolve(r.result);
          r.onerror = () => reject(r.error);
          r.readAsDataURL(f);
        }));
      } catch (err) {
        this.page.say(`${f.name} could not be read: ${err && err.message || err}`);
      }
    }
    this.showImages();
  }

  clearImages() {
    this.images = [];
    this.showImages();
  }

  // showImages lists the waiting images, each with a button that drops it.
  showImages() {
    const figs = this.images.map((url, i) => {
      const fig = document.createElement("figure");
      const img = document.createElement("img");
      img.src = url;
      img.alt = `Image ${i + 1} to send`;
      const del = document.createElement("button");
      del.type = "button";
      del.className = "quiet";
      del.setAttribute("aria-label", `Remove image ${i + 1}`);
      del.textContent = "✕";
      del.addEventListener("click", () => {
        this.images.splice(i, 1);
        this.showImages();
      });
      fig.append(img, del);
      return fig;
    });
    this.el.attachments.replaceChildren(...figs);
    this.el.attachments.hidden = figs.length === 0;
  }

  async open() {
    this.store = await ConversationStore.open();
    this.el.storeNote.hidden = this.store.persistent;
    const list = await this.store.list();
    const wanted = new URLSearchParams(location.search).get("conversation");
    const c = (wanted && list.find((x) => x.id === wanted)) || list[0];
    if (c) this.show(c);
    else this.show(newConversation(this.el.system.value));
    await this.refreshList();
  }

  // show makes c the conversation on screen.
  show(c) {
    this.conv = c;
    this.page.demo.conversation = c.id;
    this.page.demo.messages = c.messages;
    this.el.system.value = c.system || "";
    this.el.chatLog.replaceChildren(this.el.chatEmpty);
    this.el.chatEmpty.hidden = c.messages.length > 0;
    for (const m of c.messages) this.bubble(m);
    this.placeActions();
    this.el.chatLog.scrollTop = this.el.chatLog.scrollHeight;
    this.markCurrent();
  }

  async save() {
    this.conv.system = this.el.system.value;
    this.conv.title = titleOf(this.conv);
    if (!this.conv.messages.length) return; // an empty chat is not worth a row
    try {
      await this.store.save(this.conv);
    } catch (err) {
      this.page.say(`The conversation could not be saved: ${err.message}`);
    }
    await this.refreshList();
  }

  async refreshList() {
    const list = await this.store.list();
    this.page.demo.conversations = list.map((c) => ({ id: c.id, title: c.title, messages: c.messages.length }));
    const items = list.map((c) => {
      const li = document.createElement("li");
      li.dataset.id = c.id;
      const open = document.createElement("button");
      open.type = "button";
      open.className = "open";
      open.textContent = c.title || "New chat";
      open.title = `${c.messages.length} messages · ${new Date(c.updated).toLocaleString()}`;
      open.addEventListener("click", () => this.switchTo(c.id));
      const del = document.createElement("button");
      del.type = "button";
      del.className = "delete icon quiet";
      del.setAttribute("aria-label", `Delete “${c.title}”`);
      del.textContent = "✕";
      del.addEventListener("click", () => this.remove(c.id));
      li.append(open, del);
      return li;
    });
    this.el.conversations.replaceChildren(...items);
    this.markCurrent();
  }

  markCurrent() {
    for (const li of this.el.conversations.children) li.classList.toggle("current", li.dataset.id === this.conv.id);
  }

  async switchTo(id) {
    if (this.page.busy()) return;
    const c = await this.store.get(id);
    if (c) this.show(c);
    this.page.closeSidebar();
  }

  async remove(id) {
    if (this.page.busy() && id === this.conv.id) return;
    await this.store.remove(id);
    if (id === this.conv.id) this.show(newConversation(this.el.system.value));
    await this.refreshList();
    this.page.say("Conversation deleted.");
  }

  newChat() {
    if (this.page.busy()) return;
    this.show(newConversation(this.el.system.value));
    this.el.chatInput.focus();
    this.page.closeSidebar();
  }

  // bubble adds message m to the log and returns its view: the element
  // for the reply's content and, made on demand, one for its reasoning.
  bubble(m) {
    this.el.chatEmpty.hidden = true;
    const div = document.createElement("div");
    div.className = `msg ${m.role}`;
    const role = document.createElement("span");
    role.className = "role";
    role.textContent = m.role === "user" ? "You" : "Model";
    const content = document.createElement("div");
    content.className = "content";
    div.append(role);
    if (m.images && m.images.length) {
      const imgs = document.createElement("div");
      imgs.className = "images";
      for (const url of m.images) {
        const img = document.createElement("img");
        img.src = url;
        img.alt = "An image you sent";
        imgs.append(img);
      }
      div.append(imgs);
    }
    const view = {
      div, content, reasoning: null,
      set: (text, reasoning) => {
        if (reasoning && !view.reasoning) {
          const d = document.createElement("details");
          d.className = "reasoning";
          d.open = !text;
          const s = document.createElement("summary");
          s.textContent = "Thinking";
          view.reasoningText = document.createElement("div");
          view.reasoningText.className = "reasoning-text";
          d.append(s, view.reasoningText);
          div.insertBefore(d, content);
          view.reasoning = d;
        }
        if (view.reasoning) {
          view.reasoningText.textContent = reasoning;
          if (text && view.reasoning.dataset.auto !== "done") { // the answer began: fold the thinking away
            view.reasoning.open = false;
            view.reasoning.dataset.auto = "done";
          }
        }
        if (m.role === "assistant") render(content, text);
        else content.textContent = text;
      },
    };
    div.append(content);
    view.set(m.content, m.reasoning || "");
    this.el.chatLog.append(div);
    return view;
  }

  // placeActions puts Stop, Regenerate and Copy under the last reply.
  placeActions() {
    const last = lastReply(this.el.chatLog);
    const msgs = this.conv.messages;
    const show = msgs.length > 0 && msgs[msgs.length - 1].role === "assistant";
    this.el.replyActions.hidden = !show;
    if (show && last) last.after(this.el.replyActions);
  }

  conversation() {
    const sys = this.el.system.value.trim();
    const msgs = this.conv.messages.map((m) => ({
      role: m.role,
      content: m.images && m.images.length
        ? [...m.images.map((url) => ({ type: "image_url", image_url: { url } })), { type: "text", text: m.content }]
        : m.content,
    }));
    return (sys ? [{ role: "system", content: sys }] : []).concat(msgs);
  }

  // reply asks the model for the next assistant turn, streaming it into a
  // new message that is saved as it stands when the reply ends or stops.
  async reply() {
    const input = { messages: this.conversation() };
    const m = { role: "assistant", content: "" };
    this.conv.messages.push(m);
    const view = this.bubble(m);
    this.placeActions();
    this.el.chatLog.scrollTop = this.el.chatLog.scrollHeight;
    try {
      const stats = await this.page.generate(input, {
        update: (text, reasoning) => {
          m.content = text;
          if (reasoning) m.reasoning = reasoning;
          view.set(text, reasoning);
        },
        scroller: this.el.chatLog,
      });
      m.stopped = stats.stopped;
    } catch (err) {
      if (!m.content) {
        this.conv.messages.pop();
        view.div.remove();
      }
      this.placeActions();
      this.page.showError(err);
    }
    this.placeActions();
    await this.save();
  }

  async send() {
    if (this.page.busy()) return;
    const text = this.el.chatInput.value.trim();
    try {
      await this.page.ensureLoaded();
    } catch (err) {
      this.page.showError(err);
      return;
    }
    if (text || this.images.length) {
      const m = { role: "user", content: text };
      if (this.images.length) m.images = this.images;
      this.conv.messages.push(m);
      this.bubble(m);
      this.el.chatInput.value = "";
      this.clearImages();
      await this.save();
    }
    const msgs = this.conv.messages;
    if (!msgs.length || msgs[msgs.length - 1].role !== "user") {
      this.page.say("Write a message first.");
      return;
    }
    await this.reply();
  }

  async regenerate() {
    if (this.page.busy()) return;
    const msgs = this.conv.messages;
    if (msgs.length && msgs[msgs.length - 1].role === "assistant") {
      msgs.pop();
      lastReply(this.el.chatLog).remove();
    }
    if (!msgs.length) {
      this.page.say("Nothing to regenerate.");
      return;
    }
    try {
      await this.page.ensureLoaded();
    } catch (err) {
      this.page.showError(err);
      return;
    }
    await this.reply();
  }

  async clear() {
    if (this.page.busy()) return;
    this.conv.messages.length = 0;
    this.show(this.conv);
    await this.store.remove(this.conv.id);
    await this.refreshList();
    this.page.say("Conversation cleared.");
  }

  async copy() {
    const msgs = this.conv.messages;
    const last = msgs[msgs.length - 1];
    if (!last || last.role !== "assistant") return;
    try {
      await navigator.clipboard.writeText(last.content);
      this.page.say("Reply copied.");
    } catch {
      this.page.say("The browser did not allow copying.");
    }
  }
}

function lastReply(log) {
  const all = log.querySelectorAll(".msg.assistant");
  return all[all.length - 1] || null;
}
