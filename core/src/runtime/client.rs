//! A PJRT client and its devices.

use std::sync::Arc;

use super::ffi::{self, args, call};
use super::options::{env_create_options, ClientOptions, NamedValues};
use super::plugin::Plugin;
use super::quiet::quiet_stderr;
use crate::error::Result;
use crate::Error;

/// Owns the `PJRT_Client`. Buffers and executables hold an `Arc` to it, so it is destroyed after
/// the last of them, exactly once.
pub(crate) struct ClientHandle {
    pub plugin: &'static Plugin,
    pub raw: *mut ffi::PJRT_Client,
}

// SAFETY: PJRT clients are thread-safe; the handle is only destroyed in Drop.
unsafe impl Send for ClientHandle {}
// SAFETY: as above.
unsafe impl Sync for ClientHandle {}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        let mut a = args!(PJRT_Client_Destroy_Args { client: self.raw });
        // Nothing useful can be done with a failure while dropping.
        let _ = call!(self.plugin, PJRT_Client_Destroy, &mut a);
    }
}

/// A device the client can run on.
#[derive(Debug, Clone)]
pub struct Device {
    pub(crate) raw: *mut ffi::PJRT_Device,
    /// The global device id (the one device assignments name).
    pub id: i64,
    /// The plugin's kind string, e.g. "cpu".
    pub kind: String,
    pub description: String,
}

// SAFETY: a device pointer is owned by its client and immutable; it is only passed back to PJRT.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

/// A device's memory, in bytes, as its allocator counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Held by live buffers and running programs now.
    pub in_use_bytes: i64,
    /// The most ever held at once in this process, where the allocator tracks it.
    pub peak_bytes: Option<i64>,
    /// How much the allocator may hand out, where it has a limit.
    pub limit_bytes: Option<i64>,
}

/// A PJRT client: compiles programs and owns buffers on its devices. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    pub(crate) handle: Arc<ClientHandle>,
    devices: Arc<Vec<Device>>,
    platform_name: String,
    platform_version: String,
}

impl Client {
    /// A client of the default plugin (see [`Plugin::from_env`]) with default options.
    pub fn from_env() -> Result<Client> {
        Client::new(Plugin::from_env()?, &ClientOptions::default())
    }

    /// A client of `plugin`, created with the `options` it declares (the CPU-only ones reach the
    /// CPU plugin alone) and those of `XLAPROF_PJRT_CREATE_OPTIONS`, which win.
    pub fn new(plugin: &'static Plugin, options: &ClientOptions) -> Result<Client> {
        let options = options.resolve(plugin.kind(), &env_create_options()?);
        let named = NamedValues::new(&options);
        let mut a = args!(PJRT_Client_Create_Args {
            create_options: named.as_ptr(),
            num_options: named.len(),
        });
        let quiet = quiet_stderr();
        let created = call!(plugin, PJRT_Client_Create, &mut a);
        drop(quiet);
        created?;
        let handle = Arc::new(ClientHandle { plugin, raw: a.client });

        let mut n = args!(PJRT_Client_PlatformName_Args { client: handle.raw });
        call!(plugin, PJRT_Client_PlatformName, &mut n)?;
        let platform_name = Plugin::string(n.platform_name, n.platform_name_size);
        let mut v = args!(PJRT_Client_PlatformVersion_Args { client: handle.raw });
        call!(plugin, PJRT_Client_PlatformVersion, &mut v)?;
        let platform_version = Plugin::string(v.platform_version, v.platform_version_size);

        let devices = addressable_devices(&handle)?;
        Ok(Client { handle, devices: Arc::new(devices), platform_name, platform_version })
    }

    pub fn plugin(&self) -> &'static Plugin {
        self.handle.plugin
    }

    /// e.g. "cpu".
    pub fn platform_name(&self) -> &str {
        &self.platform_name
    }

    pub fn platform_version(&self) -> &str {
        &self.platform_version
    }

    /// The devices this process can use, in the plugin's order.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Device `index`'s memory as its allocator reports it (`PJRT_Device_MemoryStats`); `None`
    /// where the plugin keeps no such figures (the CPU plugin).
    pub fn device_memory(&self, index: usize) -> Result<Option<DeviceMemory>> {
        let device = self.device(index)?;
        let mut a = args!(PJRT_Device_MemoryStats_Args { device: device.raw });
        match call!(self.handle.plugin, PJRT_Device_MemoryStats, &mut a) {
            Ok(()) => Ok(Some(DeviceMemory {
                in_use_bytes: a.bytes_in_use,
                peak_bytes: a.peak_bytes_in_use_is_set.then_some(a.peak_bytes_in_use),
                limit_bytes: a.bytes_limit_is_set.then_some(a.bytes_limit),
            })),
            Err(Error::Unsupported(_))
            | Err(Error::Pjrt { code: crate::error::PjrtErrorCode::Unimplemented, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn device(&self, index: usize) -> Result<&Device> {
        self.devices.get(index).ok_or(Error::NoSuchDevice { index, count: self.devices.len() })
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("platform", &self.platform_name)
            .field("version", &self.platform_version)
            .field("devices", &self.devices.len())
            .finish()
    }
}

fn addressable_devices(handle: &ClientHandle) -> Result<Vec<Device>> {
    let plugin = handle.plugin;
    let mut a = args!(PJRT_Client_AddressableDevices_Args { client: handle.raw });
    call!(plugin, PJRT_Client_AddressableDevices, &mut a)?;
    let raw: &[*mut ffi::PJRT_Device] = if a.addressable_devices.is_null() {
        &[]
    } else {
        // SAFETY: PJRT returns an array of `num_addressable_devices` devices owned by the client.
        unsafe { std::slice::from_raw_parts(a.addressable_devices, a.num_addressable_devices) }
    };
    raw.iter()
        .map(|&device| {
            let mut d = args!(PJRT_Device_GetDescription_Args { device: device });
            call!(plugin, PJRT_Device_GetDescription, &mut d)?;
            let desc = d.device_description;
            let mut id = args!(PJRT_DeviceDescription_Id_Args { device_description: desc });
            call!(plugin, PJRT_DeviceDescription_Id, &mut id)?;
            let mut kind = args!(PJRT_DeviceDescription_Kind_Args { device_description: desc });
            call!(plugin, PJRT_DeviceDescription_Kind, &mut kind)?;
            let mut text =
                args!(PJRT_DeviceDescription_DebugString_Args { device_description: desc });
            call!(plugin, PJRT_DeviceDescription_DebugString, &mut text)?;
            Ok(Device {
                raw: device,
                id: id.id as i64,
                kind: Plugin::string(kind.device_kind, kind.device_kind_size),
                description: Plugin::string(text.debug_string, text.debug_string_size),
            })
        })
        .collect()
}
