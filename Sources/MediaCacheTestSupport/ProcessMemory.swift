import Foundation

/// Memory figures of the current process, read from `/proc/self/status` (Linux).
public enum ProcessMemory {
    /// The peak resident set size (`VmHWM`) in bytes, or `nil` where `/proc` is missing.
    public static func peakResidentBytes() -> Int64? {
        field("VmHWM")
    }

    private static func field(_ name: String) -> Int64? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            let digits = line.dropFirst(name.count + 1).filter(\.isNumber)
            return Int64(digits).map { $0 * 1024 }
        }
        return nil
    }
}
