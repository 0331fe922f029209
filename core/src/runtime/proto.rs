//! The few protobuf messages PJRT wants from us, encoded by hand (a handful of fields do not
//! justify a protobuf toolchain in the build).
//!
//! `CompileOptionsProto` (xla/pjrt/proto/compile_options.proto) with its
//! `ExecutableBuildOptionsProto` and `DeviceAssignmentProto` (xla/xla_data.proto).
//! The CPU plugin aborts the process on an empty `CompileOptionsProto` (replica_count > 0 is
//! CHECKed), so every compile sends one replica, one partition and a device assignment.

/// A protobuf message under construction.
#[derive(Default)]
pub(crate) struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn tag(&mut self, field: u32, wire_type: u8) {
        self.varint(((field as u64) << 3) | wire_type as u64);
    }

    pub fn int(mut self, field: u32, value: i64) -> Self {
        self.tag(field, 0);
        self.varint(value as u64);
        self
    }

    pub fn bool(self, field: u32, value: bool) -> Self {
        self.int(field, value as i64)
    }

    pub fn bytes(mut self, field: u32, value: &[u8]) -> Self {
        self.tag(field, 2);
        self.varint(value.len() as u64);
        self.0.extend_from_slice(value);
        self
    }

    pub fn message(self, field: u32, value: Message) -> Self {
        self.bytes(field, &value.0)
    }

    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// Options for one compile: the devices (ids) of its partitions, one for a one-device program,
/// plus XLA debug options (`DebugOptions` fields by name, e.g. `xla_dump_to`), passed as
/// `env_option_overrides`. Several partitions turn on SPMD partitioning with Shardy, whose
/// annotations the program carries.
pub(crate) fn compile_options(device_ids: &[i64], overrides: &[(String, Override)]) -> Vec<u8> {
    let partitions = device_ids.len().max(1) as i64;
    let mut device_assignment = Message::default()
        .int(1, 1) // replica_count
        .int(2, partitions); // computation_count
    for &id in device_ids {
        // computation_devices[partition].replica_device_ids = [id]
        device_assignment = device_assignment.message(3, Message::default().int(1, id));
    }
    let mut build_options = Message::default()
        .int(1, -1) // device_ordinal: unset, the device assignment decides
        .int(4, 1) // num_replicas
        .int(5, partitions) // num_partitions
        .message(9, device_assignment);
    if partitions > 1 {
        build_options = build_options
            .bool(6, true) // use_spmd_partitioning
            .bool(19, true); // use_shardy_partitioner
    }
    let mut options = Message::default().message(3, build_options);
    for (name, value) in overrides {
        let value = match value {
            Override::Str(s) => Message::default().bytes(1, s.as_bytes()),
            Override::Bool(b) => Message::default().bool(2, *b),
            Override::Int(i) => Message::default().int(3, *i),
        };
        // map<string, OptionOverrideProto> entries are messages {key = 1, value = 2}.
        let entry = Message::default().bytes(1, name.as_bytes()).message(2, value);
        options = options.message(7, entry);
    }
    options.finish()
}

/// A value for one XLA `DebugOptions` field.
#[derive(Debug, Clone, PartialEq)]
pub enum Override {
    Str(String),
    Bool(bool),
    Int(i64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_negative_ints_follow_the_wire_format() {
        assert_eq!(Message::default().int(1, 150).finish(), vec![0x08, 0x96, 0x01]);
        // int64 -1 is ten bytes on the wire.
        let neg = Message::default().int(1, -1).finish();
        assert_eq!(neg.len(), 11);
        assert_eq!(neg[10], 0x01);
    }

    #[test]
    fn compile_options_nest_the_build_options() {
        let bytes = compile_options(&[0], &[]);
        assert_eq!(bytes[0], (3 << 3) | 2, "field 3, length-delimited");
        assert_eq!(bytes[1] as usize, bytes.len() - 2);
    }
}
