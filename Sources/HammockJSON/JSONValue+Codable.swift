// `JSONValue`, `JSONNumber` and `JSONPointer` as members of `Codable` types. Through `JSONValueEncoder` and
// `JSONValueDecoder` a value passes as it is. Any other coder sees plain JSON: objects through a keyed
// container (their order then is that coder's), numbers as `Int` when exact and `Double` otherwise.

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        if let decoder = decoder as? ValueDecoder {
            self = try decoder.decode(JSONValue.self)
        } else if let keyed = try? decoder.container(keyedBy: JSONCodingKey.self) {
            var object = JSONObject(minimumCapacity: keyed.allKeys.count)
            for key in keyed.allKeys { object[key.stringValue] = try keyed.decode(JSONValue.self, forKey: key) }
            self = .object(object)
        } else if var unkeyed = try? decoder.unkeyedContainer() {
            var elements: [JSONValue] = []
            while !unkeyed.isAtEnd { elements.append(try unkeyed.decode(JSONValue.self)) }
            self = .array(elements)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                self = .null
            } else if let bool = try? single.decode(Bool.self) {
                self = .bool(bool)
            } else if let string = try? single.decode(String.self) {
                self = .string(string)
            } else {
                self = .number(try JSONNumber(from: decoder))
            }
        }
    }

    public func encode(to encoder: any Encoder) throws {
        if let encoder = encoder as? ValueEncoder {
            encoder.node.content = .single(self)
            return
        }
        switch self {
        case .null:
            var single = encoder.singleValueContainer()
            try single.encodeNil()
        case .bool(let bool):
            var single = encoder.singleValueContainer()
            try single.encode(bool)
        case .number(let number):
            try number.encode(to: encoder)
        case .string(let string):
            var single = encoder.singleValueContainer()
            try single.encode(string)
        case .array(let elements):
            var unkeyed = encoder.unkeyedContainer()
            for element in elements { try unkeyed.encode(element) }
        case .object(let object):
            var keyed = encoder.container(keyedBy: JSONCodingKey.self)
            for (key, value) in object { try keyed.encode(value, forKey: JSONCodingKey(stringValue: key)) }
        }
    }
}

extension JSONNumber: Codable {
    public init(from decoder: any Decoder) throws {
        if let decoder = decoder as? ValueDecoder {
            self = try decoder.decode(JSONNumber.self)
            return
        }
        let single = try decoder.singleValueContainer()
        if let integer = try? single.decode(Int.self) {
            self.init(integer)
        } else {
            let double = try single.decode(Double.self)
            guard let number = JSONNumber(exactly: double) else {
                throw DecodingError.dataCorruptedError(in: single, debugDescription: "must be a finite number, got \(double)")
            }
            self = number
        }
    }

    public func encode(to encoder: any Encoder) throws {
        if let encoder = encoder as? ValueEncoder {
            encoder.node.content = .single(.number(self))
            return
        }
        var single = encoder.singleValueContainer()
        if let integer = intValue { try single.encode(integer) } else { try single.encode(doubleValue) }
    }
}

/// A pointer is written as its text ("/headers/Accept", "" for the whole document).
extension JSONPointer: Codable {
    public init(from decoder: any Decoder) throws {
        let single = try decoder.singleValueContainer()
        let text = try single.decode(String.self)
        guard let pointer = JSONPointer(text) else {
            throw DecodingError.dataCorruptedError(
                in: single, debugDescription: "must be a JSON Pointer (empty, or \"/\" before each key), got \"\(text)\"")
        }
        self = pointer
    }

    public func encode(to encoder: any Encoder) throws {
        var single = encoder.singleValueContainer()
        try single.encode(description)
    }
}
