import HammockJSON

// Hand-written forms of the lines every load sends: `load` (engine → plugin) and its answer, `newData` or
// `notModified`, with `started` before it from a plugin that queues loads (plugin → engine; `newData` is a
// push too). Through the Codable coders a small one costs 1.4–2.3× as much to encode or decode (about 1 µs
// more; measured over 200,000 messages each way, release build), and a streaming plugin may push 100,000 a
// second. Each form must equal the declared one, which ProtocolMessages in HammockPluginTests pins; anything
// out of the ordinary (a missing or mistyped member, a non-integral id) is left to the declared form, so its
// errors are the only ones there are.

extension EngineMessage {
    var hotPathJSON: JSONValue? {
        guard case .load(let source, let id, let etag, let lastModified, let timeout, let pages) = self else { return nil }
        var object: JSONObject = ["op": "load", "source": .string(source), "id": .number(JSONNumber(id))]
        if let etag { object["etag"] = .string(etag) }
        if let lastModified { object["lastModified"] = .string(lastModified) }
        if let seconds = timeout.flatMap(JSONNumber.init(exactly:)) { object["timeout"] = .number(seconds) }
        if let pages { object["pages"] = .number(JSONNumber(pages)) }
        return .object(object)
    }

    init?(hotPath value: JSONValue) {
        guard case .object(let object) = value, object["op"] == "load",
            case .string(let source)? = object["source"], let id = object["id"]?.numberValue?.intValue,
            let etag = HotPath.optionalString(object["etag"]), let lastModified = HotPath.optionalString(object["lastModified"])
        else { return nil }
        var timeout: Double?
        if let member = object["timeout"], !member.isNull {
            guard let seconds = member.numberValue?.doubleValue, seconds.isFinite else { return nil }
            timeout = seconds
        }
        var pages: Int?
        if let member = object["pages"], !member.isNull {
            guard let count = member.numberValue?.intValue, count >= 1 else { return nil }
            pages = count
        }
        self = .load(source: source, id: id, etag: etag, lastModified: lastModified, timeout: timeout, pages: pages)
    }
}

extension PluginMessage {
    var hotPathJSON: JSONValue? {
        switch self {
        case .newData(let id, let source, let content, let etag, let lastModified):
            var object: JSONObject = ["type": "newData"]
            if let source { object["source"] = .string(source) }
            object["id"] = .number(JSONNumber(id))
            object["content"] = content
            if let etag { object["etag"] = .string(etag) }
            if let lastModified { object["lastModified"] = .string(lastModified) }
            return .object(object)
        case .pushedData(let source, let content):
            return ["type": "newData", "source": .string(source), "content": content]
        case .started(let id):
            return ["type": "started", "id": .number(JSONNumber(id))]
        case .notModified(let id):
            // Every poll of an unchanged HTTP resource answers with one.
            return ["type": "notModified", "id": .number(JSONNumber(id))]
        case .meta(let id, let meta):
            // And every answer of a rest source comes after one (its status, validators and URL).
            return ["type": "meta", "id": .number(JSONNumber(id)), "meta": .object(meta)]
        default:
            return nil
        }
    }

    init?(hotPath value: JSONValue) {
        guard case .object(let object) = value else { return nil }
        // Lines that carry a load's id alone: `notModified`, and `started` (one per load from a plugin that
        // queues loads, as many as its answers).
        if object["type"] == "notModified" || object["type"] == "started" {
            guard case .number(let number)? = object["id"], let id = number.intValue else { return nil }
            self = object["type"] == "started" ? .started(id: id) : .notModified(id: id)
            return
        }
        // A load's `meta` (one before every answer of a rest source); a push's (no id) is the declared form's.
        if object["type"] == "meta" {
            guard case .number(let number)? = object["id"], let id = number.intValue, case .object(let meta)? = object["meta"] else {
                return nil
            }
            self = .meta(id: id, meta: meta)
            return
        }
        guard object["type"] == "newData", let content = object["content"],
            let source = HotPath.optionalString(object["source"])
        else { return nil }
        switch object["id"] {
        case nil, .null?:
            guard let source else { return nil }
            self = .pushedData(source: source, content: content)
        case .number(let number)?:
            guard let id = number.intValue, let etag = HotPath.optionalString(object["etag"]),
                let lastModified = HotPath.optionalString(object["lastModified"])
            else { return nil }
            self = .newData(id: id, source: source, content: content, etag: etag, lastModified: lastModified)
        default:
            return nil
        }
    }
}

private enum HotPath {
    /// `.some(nil)` for an absent or null member, `.some(text)` for a string, nil (not this path's to
    /// decide) for anything else.
    static func optionalString(_ member: JSONValue?) -> String?? {
        switch member {
        case nil, .null?: .some(nil)
        case .string(let text)?: .some(text)
        default: nil
        }
    }
}
