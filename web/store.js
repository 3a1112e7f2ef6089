// store.js keeps the page's conversations in IndexedDB (database
// "tessera-chat", store "conversations"), so that a reload or a closed tab
// loses nothing. A conversation is
//
//   {id, title, system, messages: [{role, content, reasoning?}], updated, model?}
//
// Without IndexedDB (a private window that refuses it) the store keeps
// them in memory for the page's life instead, and says so (persistent).

const DB = "tessera-chat";
const STORE = "conversations";

function request(r) {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

export class ConversationStore {
  constructor(db) {
    this.db = db; // null: in memory only
    this.memory = new Map();
    this.persistent = !!db;
  }

  // open opens the database, or falls back to memory.
  static async open() {
    try {
      const open = indexedDB.open(DB, 1);
      open.onupgradeneeded = () => open.result.createObjectStore(STORE, { keyPath: "id" });
      return new ConversationStore(await request(open));
    } catch {
      return new ConversationStore(null);
    }
  }

  _store(mode) {
    return this.db.transaction(STORE, mode).objectStore(STORE);
  }

  // list resolves to every conversation, the latest first.
  async list() {
    const all = this.db ? await request(this._store("readonly").getAll()) : [...this.memory.values()];
    return all.sort((a, b) => b.updated - a.updated);
  }

  async get(id) {
    return this.db ? request(this._store("readonly").get(id)) : this.memory.get(id);
  }

  // save writes c, stamped with the time.
  async save(c) {
    c.updated = Date.now();
    const copy = structuredClone(c);
    if (this.db) await request(this._store("readwrite").put(copy));
    else this.memory.set(c.id, copy);
  }

  async remove(id) {
    if (this.db) await request(this._store("readwrite").delete(id));
    else this.memory.delete(id);
  }
}

// newConversation is an empty conversation.
export function newConversation(system = "") {
  const id = `c-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  return { id, title: "New chat", system, messages: [], updated: Date.now() };
}

// titleOf is a conversation's title: its first message, shortened.
export function titleOf(c) {
  const first = c.messages.find((m) => m.role === "user");
  if (!first) return "New chat";
  const t = first.content.replace(/\s+/g, " ").trim();
  return t.length > 48 ? t.slice(0, 47) + "…" : t;
}
