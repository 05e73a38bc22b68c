//! Every handle frees what it made, in any drop order: counted with the fake
//! driver's live-object hooks. Its own process, so no other test's objects
//! are counted.
mod common;

use kaio::{Buffer, Device, Dtype, Event, KernelArgs, LaunchConfig, Module, Op, Stream};

#[test]
fn dropping_handles_in_any_order_frees_everything() {
    let fake = fake_or_skip!("dropping_handles_in_any_order_frees_everything");
    let live = || unsafe {
        ((fake.live_allocations)(), (fake.live_modules)(), (fake.live_streams)(), (fake.live_events)())
    };
    let before = live();
    {
        let dev = Device::open(0).unwrap();
        let stream = Stream::non_blocking(&dev).unwrap();
        let event = Event::new(&dev).unwrap();
        let buf = Buffer::<f32>::alloc(&dev, 1024).unwrap();
        let foreign = unsafe { Buffer::<f32>::from_raw_parts(&dev, buf.device_ptr(), 2048) }.unwrap();
        let op = Op::softmax(&dev, Dtype::F32, 2, 256).unwrap();
        let module = Module::load_ptx(&dev, include_str!("../../../../examples/dequant_i8.ptx")).unwrap();
        let kernel = module.kernel("dequant_i8").unwrap();
        assert!(live().0 > before.0 && live().1 > before.1 && live().2 > before.2 && live().3 > before.3);

        // Parents first: children keep them alive.
        drop(dev);
        drop(module);
        op.launch(&stream, &[foreign.view(2, 256), buf.view(2, 256).with_offset(512)]).unwrap();
        let args = KernelArgs::new().ptr(&buf).ptr(&buf).arg(1.0f32).arg(1u32);
        unsafe { kernel.launch(&stream, &LaunchConfig::linear(1, 32), &args) }.unwrap();
        event.record(&stream).unwrap();
        drop(stream);
        event.synchronize().unwrap();
        drop(buf);
        drop(foreign); // a wrapper: must not free (or double-free) the memory
        drop(kernel);
        drop(op);
        drop(event);
    }
    assert_eq!(live(), before, "(allocations, modules, streams, events) still live");
}
